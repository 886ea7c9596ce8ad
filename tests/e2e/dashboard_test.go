//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// terminal is a program running in tmux (a real terminal) that a test types into and reads.
type terminal struct {
	t       *testing.T
	f       *framework.Framework
	session string
}

func newTerminal(t *testing.T, f *framework.Framework, script string) *terminal {
	term := &terminal{t: t, f: f, session: "podvirt-" + f.Namespace}
	term.tmux("new-session", "-d", "-s", term.session, "-x", "120", "-y", "40", "sh", "-c", script)
	t.Cleanup(func() { _ = exec.Command("tmux", "kill-session", "-t", term.session).Run() })
	return term
}

func (term *terminal) tmux(args ...string) string {
	out, err := exec.CommandContext(term.f.Context(), "tmux", args...).CombinedOutput()
	if err != nil {
		term.t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

// keys sends tmux key names (Enter, C-], or text).
func (term *terminal) keys(keys ...string) {
	term.tmux(append([]string{"send-keys", "-t", term.session}, keys...)...)
}

// screen is what the terminal shows.
func (term *terminal) screen() string { return term.tmux("capture-pane", "-p", "-t", term.session) }

// waitFor waits until the screen shows want, sending keys (if any) before each look.
func (term *terminal) waitFor(what, want string, timeout time.Duration, keys ...string) {
	term.t.Helper()
	term.f.Eventually(what, timeout, func(context.Context) (bool, error) {
		if len(keys) > 0 {
			term.keys(keys...)
		}
		s := term.screen()
		return strings.Contains(s, want), errors.New(tail(s, 12))
	})
}

// The dashboard in a real terminal against the local cluster, as a user drives it: a stopped VM is
// started and followed to Running, its details show the instance's timeline and events, the
// instances view lists it, a VNC proxy started from the dashboard serves the display, its console
// is opened, used and left with Ctrl+], the VM is stopped and then deleted after confirmation, the
// dashboard quits and the terminal is back in canonical mode.
func TestDashboardInATerminal(t *testing.T) {
	f := framework.New(t)
	requireVirtAPI(f)
	f.Create(demoVM(f.Namespace, "vm", virtv1.RunStrategyHalted, 0, ""))
	script := fmt.Sprintf(`%s --kubeconfig %s -n %s dashboard; echo "EXITED-$?"; stty -a | grep -o -- '-\?icanon'; sleep 600`,
		os.Getenv("PODVIRT_VIRTCTL"), framework.Kubeconfig(), f.Namespace)
	term := newTerminal(t, f, script)
	term.waitFor("the stopped VM listed", "Stopped", time.Minute)
	term.keys("s")
	term.waitFor("the start followed to Running", "vm is Running", bootTimeout)
	vmi := waitRunning(t, f, "vm", "")
	consoleContains(t, f, vmi, "Podvirt demo guest") // booted

	term.keys("Enter")
	term.waitFor("the instance's timeline in the details", "→ Running +", time.Minute)
	term.waitFor("the instance's events in the details", "Started VirtualMachineInstance/vm: The guest is running", time.Minute)
	term.waitFor("the launcher Pod's events in the details", "Pod/virt-launcher-vm-", time.Minute)
	term.keys("Escape") // alone: an escape followed at once by ':' would read as alt+:
	term.waitFor("back to the list", "STATUS             READY", time.Minute)
	term.keys(":vmi", "Enter")
	term.waitFor("the instances view", "VMIs · namespace "+f.Namespace, time.Minute)
	term.keys("v")
	term.waitFor("the VNC proxy's address", "VNC of "+f.Namespace+"/vm on 127.0.0.1:", time.Minute)
	port := regexp.MustCompile(`on 127\.0\.0\.1:(\d+)`).FindStringSubmatch(term.screen())
	require.Len(t, port, 2, "the VNC port on the screen")
	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+port[1], 10*time.Second)
	require.NoError(t, err, "the dashboard's VNC proxy")
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	greeting := make([]byte, 12)
	_, err = io.ReadFull(conn, greeting)
	_ = conn.Close()
	require.NoError(t, err, "the VNC greeting through the dashboard's proxy")
	assert.Equal(t, "RFB 003.008\n", string(greeting))
	term.keys(":vm", "Enter")
	term.waitFor("back to the VMs", "VMs · namespace "+f.Namespace, time.Minute)

	term.keys("c")
	term.waitFor("the console", "Successfully connected to vm console", time.Minute)
	term.waitFor("the guest's prompt", "podvirt-demo#", time.Minute, "Enter")
	term.keys("echo dash-$((6*7))", "Enter")
	term.waitFor("the command's output", "dash-42", time.Minute)
	term.keys("C-]")
	term.waitFor("back in the dashboard", "virtctl dashboard", time.Minute)

	term.keys("s")
	term.waitFor("the stop confirmation", "stop "+f.Namespace+"/vm? (y/n)", time.Minute)
	term.keys("y")
	term.waitFor("the stop followed to Stopped", "vm is Stopped", 2*time.Minute)
	term.keys("C-d")
	term.waitFor("the delete confirmation", "delete VM "+f.Namespace+"/vm? (y/n)", time.Minute)
	term.keys("y")
	term.waitFor("the VM deleted", "vm deleted", time.Minute)
	err = f.Client.Get(f.Context(), client.ObjectKey{Namespace: f.Namespace, Name: "vm"}, &virtv1.VirtualMachine{})
	assert.True(t, apierrors.IsNotFound(err), "the VM is gone from the API: %v", err)
	term.keys("q")
	term.waitFor("the dashboard exited", "EXITED-0", time.Minute)
	term.waitFor("the terminal restored", "\nicanon", time.Minute)
}
