//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// undeclaredPortUserData starts a second web server on a port the VM does not declare.
const undeclaredPortUserData = "#!/bin/sh\nhttpd -p 8080 -h /var/www && echo undeclared-port-8080-serving\n"

// The streams and actions of a running guest through kube-apiserver → virt-api → node agent →
// launcher: VNC (also as noVNC reaches it, through kubectl proxy), port-forward to a declared and an
// undeclared port, a console left idle behind a proxy that drops idle connections, the precise
// refusal of bad requests, migrate, softreboot, and a console session across a virt-api restart.
func TestVirtAPIStreamsAndActions(t *testing.T) {
	f := framework.New(t)
	requireVirtAPI(f)
	f.Create(demoVM(f.Namespace, "vm", virtv1.RunStrategyAlways, 0, undeclaredPortUserData))
	f.Create(demoVM(f.Namespace, "halted", virtv1.RunStrategyHalted, 0, ""))
	vmi := waitRunning(t, f, "vm", "")
	consoleContains(t, f, vmi, "undeclared-port-8080-serving")
	base := "/namespaces/" + f.Namespace

	t.Run("vnc", func(t *testing.T) {
		for _, parent := range []string{"virtualmachineinstances", "virtualmachines"} {
			ws, resp, err := f.DialSubresource(f.Config.Host, base+"/"+parent+"/vm/vnc")
			if err != nil {
				t.Fatalf("%s vnc: %v (%+v)", parent, err, resp)
			}
			if got := readStream(t, ws, 12); got != "RFB 003.008\n" {
				t.Errorf("%s vnc: the stream starts with %q, want the RFB 3.8 greeting", parent, got)
			}
			_ = ws.Close()
		}
	})
	t.Run("novnc through kubectl proxy", func(t *testing.T) { vncThroughKubectlProxy(t, f, base+"/virtualmachineinstances/vm/vnc") })
	t.Run("portforward", func(t *testing.T) {
		for _, path := range []string{
			"/virtualmachineinstances/vm/portforward/80",       // declared in the VM's interface
			"/virtualmachineinstances/vm/portforward/8080/tcp", // not declared
			"/virtualmachines/vm/portforward/8080",
		} {
			ws, resp, err := f.DialSubresource(f.Config.Host, base+path)
			if err != nil {
				t.Fatalf("%s: %v (%+v)", path, err, resp)
			}
			if err := ws.WriteMessage(websocket.BinaryMessage, []byte("GET / HTTP/1.0\r\n\r\n")); err != nil {
				t.Fatalf("%s: send the request: %v", path, err)
			}
			if page := readAll(t, ws); !strings.Contains(page, "200 OK") || !strings.Contains(page, "Podvirt demo guest") {
				t.Errorf("%s: the guest's web server answered %q", path, tail(page, 5))
			}
		}
	})
	t.Run("rbac of streams and actions", func(t *testing.T) { streamRBAC(t, f) })
	t.Run("idle console behind a proxy dropping 10 s idle connections", func(t *testing.T) { idleConsole(t, f, base) })
	t.Run("bad requests", func(t *testing.T) { badRequests(t, f) })
	t.Run("bad input corpus", func(t *testing.T) { badInputCorpus(t, f) })
	t.Run("migrate", func(t *testing.T) { migrate(t, f) })
	t.Run("softreboot", func(t *testing.T) {
		put(f, base+"/virtualmachineinstances/vm/softreboot", "", 202, "")
		consoleContains(t, f, vmi, "reboot asked by the guest agent") // the demo guest has an agent: softreboot goes through it
		banner := regexp.MustCompile(`Podvirt demo guest \S+ booted`)
		f.Eventually("the guest booted a second time", bootTimeout, func(context.Context) (bool, error) {
			logs := f.PodLogs(vmi.Status.LauncherPod, launcherv1.ConsoleLogContainer)
			return len(banner.FindAllString(logs, -1)) >= 2, errors.New(tail(logs, 10))
		})
		again := waitRunning(t, f, "vm", "")
		if again.UID != vmi.UID {
			t.Errorf("softreboot replaced the instance (%s → %s); the guest should reboot in place", vmi.UID, again.UID)
		}
	})
	t.Run("virt-api killed mid-session", func(t *testing.T) { killVirtAPIMidSession(t, f, base) })
}

// readStream reads n bytes of a websocket's binary frames (bounded by 30 s).
func readStream(t *testing.T, ws *websocket.Conn, n int) string {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	var b strings.Builder
	for b.Len() < n {
		_, data, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("read the stream after %q: %v", b.String(), err)
		}
		b.Write(data)
	}
	return b.String()[:n]
}

// readAll reads a websocket's frames until the server closes it (the guest closed its side).
func readAll(t *testing.T, ws *websocket.Conn) string {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	var b strings.Builder
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) {
				t.Errorf("the stream ended without a close frame: %v", err)
			}
			return b.String()
		}
		b.Write(data)
	}
}

// vncThroughKubectlProxy connects as noVNC does from a browser: through `kubectl proxy` (which adds
// the credentials a browser cannot), with the browser's Origin header and noVNC's "binary" subprotocol.
func vncThroughKubectlProxy(t *testing.T, f *framework.Framework, path string) {
	ctx, cancel := context.WithCancel(f.Context())
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectl(t), "--kubeconfig", framework.Kubeconfig(), "proxy", "--port=0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("kubectl proxy: %v", err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n') // "Starting to serve on 127.0.0.1:PORT"
	addr := strings.TrimSpace(line[strings.LastIndex(line, " ")+1:])
	if err != nil || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("kubectl proxy said %q (%v)", line, err)
	}
	d := websocket.Dialer{Subprotocols: []string{"binary"}, HandshakeTimeout: 30 * time.Second}
	ws, resp, err := d.DialContext(ctx, "ws://"+addr+"/apis/subresources.kubevirt.io/v1"+path, http.Header{"Origin": {"http://" + addr}})
	if err != nil {
		t.Fatalf("vnc through kubectl proxy: %v (%+v)", err, resp)
	}
	defer ws.Close()
	if got := readStream(t, ws, 12); got != "RFB 003.008\n" {
		t.Errorf("vnc through kubectl proxy starts with %q, want the RFB 3.8 greeting", got)
	}
}

// idleConsole opens the console through a TCP proxy that drops any connection idle (no byte either
// way) for 10 s, leaves it idle for 60 s, then runs a command in it. The server's pings keep it
// alive; a plain TCP connection through the same proxy is dropped (the proxy works).
func idleConsole(t *testing.T, f *framework.Framework, base string) {
	proxy := startIdleProxy(t, strings.TrimPrefix(f.Config.Host, "https://"), 10*time.Second)
	ws, resp, err := f.DialSubresource("https://"+proxy, base+"/virtualmachineinstances/vm/console")
	if err != nil {
		t.Fatalf("console through the proxy: %v (%+v)", err, resp)
	}
	v := newViewer(t, ws)
	v.typeUntil(t, "\n", "vm# ", 24) // the shell's prompt (the hostname is the VMI's name)
	idleSince := time.Now()

	plain, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	_ = plain.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := plain.Read(make([]byte, 1)); errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		t.Fatalf("a plain connection idle for 30 s through the proxy was not dropped: the test proxy does not work")
	}

	idle := time.After(time.Until(idleSince.Add(60 * time.Second)))
	for waiting := true; waiting; {
		select {
		case data, ok := <-v.frames:
			if !ok {
				t.Fatalf("the idle console was closed; it said before: %q", tail(v.seen.String(), 5))
			}
			v.seen.Write(data)
		case <-idle:
			waiting = false
		}
	}
	v.typeUntil(t, "echo still-$((40+2))\n", "still-42", 3)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// startIdleProxy forwards 127.0.0.1:random to target and closes any connection idle for idle.
func startIdleProxy(t *testing.T, target string, idle time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { _ = ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go proxyIdle(c, target, idle)
		}
	}()
	return ln.Addr().String()
}

// proxyIdle pipes c and a new connection to target; a read deadline renewed on every byte either
// way closes both once nothing moved for idle.
func proxyIdle(c net.Conn, target string, idle time.Duration) {
	defer c.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	activity := make(chan struct{}, 1)
	copyNoting := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				select {
				case activity <- struct{}{}:
				default:
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	ended := make(chan struct{}, 2)
	go func() { copyNoting(up, c); ended <- struct{}{} }()
	go func() { copyNoting(c, up); ended <- struct{}{} }()
	timer := time.NewTimer(idle)
	defer timer.Stop()
	for {
		select {
		case <-activity:
			timer.Reset(idle)
		case <-timer.C:
			_ = c.Close()
			_ = up.Close()
		case <-ended:
			_ = c.Close()
			_ = up.Close()
			<-ended
			return
		}
	}
}

// killVirtAPIMidSession deletes virt-api's Pod while a console is open: the client is told why its
// session ended, and a new session works once the replacement serves.
func killVirtAPIMidSession(t *testing.T, f *framework.Framework, base string) {
	ws, resp, err := f.DialSubresource(f.Config.Host, base+"/virtualmachineinstances/vm/console")
	if err != nil {
		t.Fatalf("console: %v (%+v)", err, resp)
	}
	pods := &corev1.PodList{}
	if err := f.Client.List(f.Context(), pods, client.InNamespace("podvirt"), client.MatchingLabels{"app.kubernetes.io/name": "virt-api"}); err != nil || len(pods.Items) == 0 {
		t.Fatalf("virt-api Pods: %v (%d)", err, len(pods.Items))
	}
	for i := range pods.Items {
		if err := f.Client.Delete(f.Context(), &pods.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
	_ = ws.SetReadDeadline(time.Now().Add(time.Minute))
	for {
		_, _, err := ws.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || !strings.Contains(ce.Text, "virt-api is shutting down") {
			t.Errorf("the session ended with %v; want a close frame saying virt-api is shutting down", err)
		}
		t.Logf("the client saw: %v", err)
		break
	}
	_ = ws.Close()
	var next *websocket.Conn
	f.Eventually("a new console session through the replacement virt-api", 3*time.Minute, func(context.Context) (bool, error) {
		c, _, err := f.DialSubresource(f.Config.Host, base+"/virtualmachineinstances/vm/console")
		next = c
		return err == nil, err
	})
	v := newViewer(t, next)
	v.typeUntil(t, "echo back-$((40+2))\n", "back-42", 6)
}

// kubectl is the kubectl binary of the cluster's release ($PODVIRT_KUBECTL, which make e2e sets).
func kubectl(t *testing.T) string {
	t.Helper()
	path := os.Getenv("PODVIRT_KUBECTL")
	if path == "" {
		t.Fatal("PODVIRT_KUBECTL is not set: run the e2e tests with make e2e, or set it to a kubectl binary")
	}
	return path
}

// migrate: the migrate subresource creates a migration of the running instance; a second one while
// the first is in progress is refused by the migration webhook; a VM without an instance is 409.
func migrate(t *testing.T, f *framework.Framework) {
	base := "/namespaces/" + f.Namespace + "/virtualmachines/"
	put(f, base+"vm/migrate", "{}", 202, "")
	list := &virtv1.VirtualMachineInstanceMigrationList{}
	if err := f.Client.List(f.Context(), list, client.InNamespace(f.Namespace)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Spec.VMIName != "vm" || !strings.HasPrefix(list.Items[0].Name, "kubevirt-migrate-vm-") {
		t.Fatalf("migrations after migrate: %+v, want one of vm named kubevirt-migrate-vm-…", list.Items)
	}
	put(f, base+"vm/migrate", "{}", 422, "spec.vmiName: Invalid value: \"vm\": migration "+list.Items[0].Name+" of this instance is in progress")
	put(f, base+"vm/migrate", `{"dryRun":["All"]}`, 422, "in progress")
	m := &virtv1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: "direct"}, Spec: virtv1.VirtualMachineInstanceMigrationSpec{VMIName: "halted"}}
	if err := f.Client.Create(f.Context(), m); err == nil || !strings.Contains(err.Error(), `spec.vmiName: Not found: "halted"`) {
		t.Errorf("a migration of a VM without an instance: %v, want spec.vmiName: Not found", err)
	}
	// Deleting the running migration aborts it: the instance stays where it is.
	before := getVMI(t, f, "vm")
	if err := f.Client.Delete(f.Context(), &list.Items[0]); err != nil {
		t.Fatal(err)
	}
	f.Eventually("the deleted migration aborted and gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		err := f.Client.Get(ctx, client.ObjectKeyFromObject(&list.Items[0]), &virtv1.VirtualMachineInstanceMigration{})
		v := getVMI(t, f, "vm")
		return apierrors.IsNotFound(err) && v.Status.MigrationState != nil && v.Status.MigrationState.Failed,
			fmt.Errorf("migration: %v; instance migration state %+v", err, v.Status.MigrationState)
	})
	if after := getVMI(t, f, "vm"); after.Status.NodeName != before.Status.NodeName || after.Status.LauncherPod != before.Status.LauncherPod || after.Status.Phase != virtv1.Running {
		t.Fatalf("after the aborted migration the instance is %s on %q in %q, want Running on %q in %q",
			after.Status.Phase, after.Status.NodeName, after.Status.LauncherPod, before.Status.NodeName, before.Status.LauncherPod)
	}
}

// put sends body to the subresource path and checks the answer's code and that its message says want.
func put(f *framework.Framework, path, body string, code int, want string) {
	f.T().Helper()
	call(f, http.MethodPut, path, body, code, want)
}

func call(f *framework.Framework, method, path, body string, code int, want string) {
	f.T().Helper()
	got, msg := subresource(f, method, path, body)
	if got != code || !strings.Contains(msg, want) {
		f.T().Errorf("%s %s %s: %d %q, want %d saying %q", method, path, body, got, msg, code, want)
	}
}

// streamRBAC: edit (alice) may open the console of a running VM in her namespace and nowhere else;
// view (bob) may open no stream and take no action, with 403 before anything is looked up.
func streamRBAC(t *testing.T, f *framework.Framework) {
	grant(f, f.Namespace, "alice", "edit")
	grant(f, f.Namespace, "bob", "view")
	alice, bob := as(f, "alice"), as(f, "bob")
	vmi := "/namespaces/" + f.Namespace + "/virtualmachineinstances/vm/"
	var ws *websocket.Conn
	f.Eventually("alice (edit) opens the console", time.Minute, func(context.Context) (bool, error) {
		c, resp, err := f.DialSubresourceAs(alice, f.Config.Host, vmi+"console")
		if err != nil {
			return false, fmt.Errorf("%v (%+v)", err, resp)
		}
		ws = c
		return true, nil
	})
	newViewer(t, ws).typeUntil(t, "echo alice-$((40+2))\n", "alice-42", 6)
	for _, sub := range []string{"console", "vnc", "portforward/80"} {
		if _, resp, err := f.DialSubresourceAs(bob, f.Config.Host, vmi+sub); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("bob (view) %s: want 403, got %v (%+v)", sub, err, resp)
		}
		if _, resp, err := f.DialSubresourceAs(alice, f.Config.Host, "/namespaces/default/virtualmachineinstances/vm/"+sub); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("alice %s in another namespace: want 403, got %v (%+v)", sub, err, resp)
		}
	}
	for _, path := range []string{vmi + "pause", vmi + "unpause", vmi + "softreboot", vmi + "reset", "/namespaces/" + f.Namespace + "/virtualmachines/vm/migrate"} {
		err := kubernetes.NewForConfigOrDie(bob).Discovery().RESTClient().Put().AbsPath("/apis/subresources.kubevirt.io/v1" + path).Body([]byte("{}")).Do(f.Context()).Error()
		if !apierrors.IsForbidden(err) {
			t.Errorf("bob (view) PUT %s: want 403, got %v", path, err)
		}
	}
}
