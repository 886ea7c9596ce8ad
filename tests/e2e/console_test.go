//go:build e2e

package e2e

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// dialConsole opens the instance's console through the kube-apiserver.
func dialConsole(t *testing.T, f *framework.Framework, ns, name string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	return f.DialSubresource(f.Config.Host, "/namespaces/"+ns+"/virtualmachineinstances/"+name+"/console")
}

// viewer reads a console websocket in the background (a gorilla connection cannot be read again
// after a read deadline passes, so deadlines are applied to the channel instead).
type viewer struct {
	ws     *websocket.Conn
	frames chan []byte
	seen   bytes.Buffer
}

func newViewer(t *testing.T, ws *websocket.Conn) *viewer {
	v := &viewer{ws: ws, frames: make(chan []byte, 1024)}
	go func() {
		for {
			kind, data, err := ws.ReadMessage()
			if err != nil {
				close(v.frames)
				return
			}
			if kind != websocket.BinaryMessage {
				t.Errorf("console frame of type %d, want binary (%d)", kind, websocket.BinaryMessage)
			}
			v.frames <- data
		}
	}()
	t.Cleanup(func() {
		_ = ws.Close()
		for range v.frames { // drain until the reader ends
		}
	})
	return v
}

// waitFor reads until the output contains want or timeout passes; it reports whether it did.
func (v *viewer) waitFor(want string, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for !strings.Contains(v.seen.String(), want) {
		select {
		case data, ok := <-v.frames:
			if !ok {
				return false
			}
			v.seen.Write(data)
		case <-deadline:
			return false
		}
	}
	return true
}

// typeUntil types input until the output contains want: a guest still booting, or a shell waiting
// for a terminal's reply, may swallow the first attempts. Bounded by attempts×5 s.
func (v *viewer) typeUntil(t *testing.T, input, want string, attempts int) {
	t.Helper()
	for range attempts {
		if err := v.ws.WriteMessage(websocket.BinaryMessage, []byte(input)); err != nil {
			t.Fatalf("type %q: %v", input, err)
		}
		if v.waitFor(want, 5*time.Second) {
			return
		}
	}
	t.Fatalf("no %q on the console after typing %q %d times; got:\n%s", want, input, attempts, tail(v.seen.String(), 15))
}

// The serial console through kube-apiserver → virt-api → node agent → the guest: a command typed
// in one viewer runs in the guest's shell and both viewers see its output.
func TestSerialConsoleSharedByTwoViewers(t *testing.T) {
	f := framework.New(t)
	requireVirtAPI(f)
	f.Create(demoVM(f.Namespace, "vm", virtv1.RunStrategyAlways, 0, ""))
	vmi := waitRunning(t, f, "vm", "")
	consoleContains(t, f, vmi, "Podvirt demo guest") // booted

	first, resp, err := dialConsole(t, f, f.Namespace, "vm")
	if err != nil {
		t.Fatalf("console: %v (%+v)", err, resp)
	}
	if got := first.Subprotocol(); got != "plain.kubevirt.io" {
		t.Errorf("subprotocol %q, want plain.kubevirt.io", got)
	}
	second, _, err := dialConsole(t, f, f.Namespace, "vm")
	if err != nil {
		t.Fatalf("second viewer: %v", err)
	}

	one, two := newViewer(t, first), newViewer(t, second)
	one.typeUntil(t, "\n", "podvirt-demo#", 24) // the shell's prompt: it is up
	one.typeUntil(t, "echo podvirt-$((6*7))\n", "podvirt-42", 6)
	if !two.waitFor("podvirt-42", time.Minute) {
		t.Errorf("the second viewer did not see the command's output; got:\n%s", tail(two.seen.String(), 15))
	}

	_, resp, err = dialConsole(t, f, f.Namespace, "nope")
	if err == nil || resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("console of an unknown instance: want 404, got %v (%+v)", err, resp)
	}
}
