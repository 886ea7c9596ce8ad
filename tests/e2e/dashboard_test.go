//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

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

// waitFor waits until the screen shows want, sending keys (if any) before each look.
func (term *terminal) waitFor(what, want string, timeout time.Duration, keys ...string) {
	term.t.Helper()
	term.f.Eventually(what, timeout, func(context.Context) (bool, error) {
		if len(keys) > 0 {
			term.keys(keys...)
		}
		s := term.tmux("capture-pane", "-p", "-t", term.session)
		return strings.Contains(s, want), errors.New(tail(s, 12))
	})
}

// The dashboard in a real terminal against the local cluster, as a user drives it: a stopped VM is
// started and shows Running, its console is opened, used and left with Ctrl+], the VM is stopped
// after confirmation, the dashboard quits and the terminal is back in canonical mode.
func TestDashboardInATerminal(t *testing.T) {
	f := framework.New(t)
	requireVirtAPI(f)
	f.Create(demoVM(f.Namespace, "vm", virtv1.RunStrategyHalted, 0, ""))
	script := fmt.Sprintf(`%s --kubeconfig %s -n %s dashboard; echo "EXITED-$?"; stty -a | grep -o -- '-\?icanon'; sleep 600`,
		os.Getenv("PODVIRT_VIRTCTL"), framework.Kubeconfig(), f.Namespace)
	term := newTerminal(t, f, script)
	term.waitFor("the stopped VM listed", "Stopped", time.Minute)
	term.keys("s")
	term.waitFor("the VM Running", "Running", bootTimeout)
	vmi := waitRunning(t, f, "vm", "")
	consoleContains(t, f, vmi, "Podvirt demo guest") // booted

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
	term.waitFor("the VM Stopped", "Stopped", 2*time.Minute)
	term.keys("q")
	term.waitFor("the dashboard exited", "EXITED-0", time.Minute)
	term.waitFor("the terminal restored", "\nicanon", time.Minute)
}
