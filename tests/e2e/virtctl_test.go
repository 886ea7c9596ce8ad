//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// virtctl runs the built binary ($PODVIRT_VIRTCTL, which make e2e builds and sets) in the test's
// namespace with stdin, and returns its combined output and exit code.
func virtctl(t *testing.T, f *framework.Framework, stdin string, args ...string) (string, int) {
	t.Helper()
	bin := os.Getenv("PODVIRT_VIRTCTL")
	if bin == "" {
		t.Fatal("PODVIRT_VIRTCTL is not set: run the e2e tests with make e2e, or set it to a virtctl binary")
	}
	ctx, cancel := context.WithTimeout(f.Context(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", framework.Kubeconfig(), "-n", f.Namespace}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	case err != nil:
		t.Fatalf("virtctl %v: %v", args, err)
	}
	return out.String(), 0
}

// virtctl as a user drives it: start --wait shows the phases to Running, a scripted console runs a
// command in the guest, restart --wait brings a new instance and a scripted console --after its
// prompt runs a command in it while it boots, reset restarts the guest in the same instance,
// stop --force --grace-period=0 --wait
// ends at Stopped, and start --wait of a VM that cannot be scheduled times out (exit 124) saying why.
func TestVirtctlLifecycleAndScriptedConsole(t *testing.T) {
	f := framework.New(t)
	requireVirtAPI(f)
	f.Create(demoVM(f.Namespace, "vm", virtv1.RunStrategyHalted, 30, ""))

	out, code := virtctl(t, f, "", "start", "vm", "--wait")
	if code != 0 || !strings.Contains(out, "VM vm was scheduled to start") || !strings.Contains(out, "instance Running") {
		t.Fatalf("start --wait: exit %d, output:\n%s", code, out)
	}
	t.Logf("start --wait:\n%s", out)

	ws, resp, err := dialConsole(t, f, f.Namespace, "vm") // the guest's shell is up before the script types
	if err != nil {
		t.Fatalf("console: %v (%+v)", err, resp)
	}
	newViewer(t, ws).typeUntil(t, "\n", "podvirt-demo# ", 24)
	_ = ws.Close()
	out, code = virtctl(t, f, "uname -a\n", "console", "vm", "--expect", `Linux podvirt-demo 6\.\S+`, "--timeout", "3")
	if code != 0 || !strings.Contains(out, "Linux podvirt-demo 6.") {
		t.Errorf("scripted console: exit %d, output:\n%s", code, tail(out, 20))
	}

	interactiveConsole(t, f)

	// migrate --wait is TestLiveMigration's.
	forwardsAndLogs(t, f)

	first := &virtv1.VirtualMachineInstance{}
	if err := f.Client.Get(f.Context(), client.ObjectKey{Namespace: f.Namespace, Name: "vm"}, first); err != nil {
		t.Fatal(err)
	}
	out, code = virtctl(t, f, "", "restart", "vm", "--wait")
	again := &virtv1.VirtualMachineInstance{}
	if err := f.Client.Get(f.Context(), client.ObjectKey{Namespace: f.Namespace, Name: "vm"}, again); code != 0 || err != nil || again.UID == first.UID {
		t.Errorf("restart --wait: exit %d (%v), instance %s → %s, output:\n%s", code, err, first.UID, again.UID, out)
	}
	// A CI script right after restart --wait: the guest is still booting, so input typed now would be
	// lost; --after holds it until the shell's prompt, and --expect then matches only the answer.
	out, code = virtctl(t, f, "uname -a\n", "console", "vm", "--after", "podvirt-demo# ", "--expect", `Linux podvirt-demo 6\.\S+`, "--timeout", "3")
	if code != 0 || !strings.Contains(out, "Linux podvirt-demo 6.") || strings.Contains("\n"+out, "\nerror: ") {
		t.Errorf("scripted console --after the prompt of a booting guest: exit %d, output:\n%s", code, tail(out, 20))
	}
	resetRestartsTheGuestOnly(t, f)

	out, code = virtctl(t, f, "", "stop", "vm", "--force", "--grace-period=0", "--wait")
	if code != 0 || !strings.Contains(out, "vm/vm Stopped") {
		t.Errorf("stop --force --grace-period=0 --wait: exit %d, output:\n%s", code, out)
	}
	out, code = virtctl(t, f, "", "stop", "vm")
	if code != 1 || !strings.Contains(out, `virtualmachines.kubevirt.io "vm": VM is not running`) {
		t.Errorf("stop of a stopped VM: exit %d, output:\n%s", code, out)
	}

	// create vm | kubectl apply -f -: a VM that starts (the seed's containerDisk image).
	manifest, code := virtctl(t, f, "", "create", "vm", "--name", "created", "--memory", "64M",
		"--volume-containerdisk", "src:kubevirt/cirros-container-disk-demo:latest", "--cloud-init-user-data-file", "/dev/null")
	if code != 0 {
		t.Fatalf("create vm: exit %d: %s", code, manifest)
	}
	apply := exec.CommandContext(f.Context(), kubectl(t), "--kubeconfig", framework.Kubeconfig(), "-n", f.Namespace, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(manifest)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply of virtctl create vm's manifest: %v: %s\n%s", err, out, manifest)
	}
	waitRunning(t, f, "created", "")

	huge := demoVM(f.Namespace, "huge", virtv1.RunStrategyHalted, 0, "")
	huge.Spec.Template.Spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("500Gi")}
	f.Create(huge)
	out, code = virtctl(t, f, "", "start", "huge", "--wait", "--timeout", "20s")
	if code != 124 || !strings.Contains(out, "timed out after 20s waiting for vm/huge to be Running") || !strings.Contains(out, "Insufficient memory") {
		t.Errorf("start --wait of an unschedulable VM: exit %d, want 124 and the scheduler's reason; output:\n%s", code, out)
	}
}

// bootID matches the guest's /proc/sys/kernel/random/boot_id as it prints it.
var bootID = regexp.MustCompile(`\n([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\r?\n`)

// resetRestartsTheGuestOnly: virtctl reset gives the guest a new boot (a new boot id) in the same
// instance; the scripted console types once the rebooted guest's prompt is there.
func resetRestartsTheGuestOnly(t *testing.T, f *framework.Framework) {
	t.Helper()
	const readID = "cat /proc/sys/kernel/random/boot_id\n"
	out, code := virtctl(t, f, readID, "console", "vm", "--expect", bootID.String(), "--timeout", "2")
	before := bootID.FindStringSubmatch(out)
	if code != 0 || before == nil {
		t.Fatalf("reading the boot id: exit %d, output:\n%s", code, tail(out, 20))
	}
	vmi := &virtv1.VirtualMachineInstance{}
	if err := f.Client.Get(f.Context(), client.ObjectKey{Namespace: f.Namespace, Name: "vm"}, vmi); err != nil {
		t.Fatal(err)
	}
	out, code = virtctl(t, f, "", "reset", "vm")
	if code != 0 || !strings.Contains(out, "VMI vm was scheduled to reset") {
		t.Fatalf("reset: exit %d, output:\n%s", code, out)
	}
	out, code = virtctl(t, f, readID, "console", "vm", "--after", "podvirt-demo# ", "--expect", bootID.String(), "--timeout", "3")
	after := bootID.FindStringSubmatch(out)
	if code != 0 || after == nil || after[1] == before[1] {
		t.Fatalf("after reset: exit %d, boot id %v before, %v after; output:\n%s", code, before, after, tail(out, 20))
	}
	again := &virtv1.VirtualMachineInstance{}
	if err := f.Client.Get(f.Context(), client.ObjectKey{Namespace: f.Namespace, Name: "vm"}, again); err != nil || again.UID != vmi.UID || again.Status.Phase != virtv1.Running {
		t.Fatalf("reset replaced or stopped the instance: %v, uid %s → %s, phase %s", err, vmi.UID, again.UID, again.Status.Phase)
	}
	t.Logf("reset: boot id %s → %s, instance %s kept", before[1], after[1], vmi.UID)
}

// interactiveConsole runs `virtctl console` in tmux (a real terminal): a typed command runs in the
// guest, Ctrl+] ends the session with exit code 0, and the terminal is back in canonical mode.
func interactiveConsole(t *testing.T, f *framework.Framework) {
	session := "podvirt-" + f.Namespace
	script := fmt.Sprintf(`%s --kubeconfig %s -n %s console vm; echo "EXITED-$?"; stty -a | grep -o -- '-\?icanon'; sleep 600`,
		os.Getenv("PODVIRT_VIRTCTL"), framework.Kubeconfig(), f.Namespace)
	tmux := func(args ...string) string {
		out, err := exec.CommandContext(f.Context(), "tmux", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "40", "sh", "-c", script)
	t.Cleanup(func() { _ = exec.Command("tmux", "kill-session", "-t", session).Run() })
	screen := func() string { return tmux("capture-pane", "-p", "-t", session, "-S", "-100") }
	waitScreen := func(what, want string, keys ...string) {
		t.Helper()
		f.Eventually(what, time.Minute, func(context.Context) (bool, error) {
			if len(keys) > 0 {
				tmux(append([]string{"send-keys", "-t", session}, keys...)...)
			}
			s := screen()
			return strings.Contains(s, want), errors.New(tail(s, 10))
		})
	}
	waitScreen("connected", "Successfully connected to vm console. The escape sequence is ^]")
	waitScreen("the guest's prompt", "podvirt-demo#", "Enter")
	tmux("send-keys", "-t", session, "echo tmux-$((6*7))", "Enter")
	waitScreen("the command's output", "tmux-42")
	tmux("send-keys", "-t", session, "C-]")
	waitScreen("virtctl exited", "EXITED-0")
	waitScreen("the terminal restored", "\nicanon")
}

// virtctlBackground starts virtctl (it serves until stopped) and returns the first line it prints
// on stdout; the process is stopped at cleanup.
func virtctlBackground(t *testing.T, f *framework.Framework, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Getenv("PODVIRT_VIRTCTL"), append([]string{"--kubeconfig", framework.Kubeconfig(), "-n", f.Namespace}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("virtctl %v: %v", args, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("virtctl %v printed nothing (%v); stderr: %s", args, err, stderr.String())
	}
	return strings.TrimSpace(line)
}

// forwardsAndLogs: port-forward reaches the guest's web server, vnc --proxy-only serves the RFB
// stream on the port it prints, vnc without a viewer says what to install, logs shows the boot.
func forwardsAndLogs(t *testing.T, f *framework.Framework) {
	line := virtctlBackground(t, f, "port-forward", "vm/vm", "0:80")
	addr, _, ok := strings.Cut(strings.TrimPrefix(line, "Forwarding from "), " -> ")
	if !ok {
		t.Fatalf("port-forward printed %q", line)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + addr + "/")
	if err != nil {
		t.Fatalf("GET through port-forward: %v", err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "Podvirt demo guest") {
		t.Errorf("through port-forward the guest answered %q", page)
	}

	// --stdio, as ssh's ProxyCommand uses it: stdin to the guest's port, its answer on stdout.
	if out, code := virtctl(t, f, "GET / HTTP/1.0\r\n\r\n", "port-forward", "--stdio", "vm/vm."+f.Namespace, "80"); code != 0 || !strings.Contains(out, "Podvirt demo guest") {
		t.Errorf("port-forward --stdio: exit %d, output %q", code, tail(out, 5))
	}

	var port struct{ Port int }
	if line := virtctlBackground(t, f, "vnc", "vm", "--proxy-only", "-o", "json"); json.Unmarshal([]byte(line), &port) != nil || port.Port == 0 {
		t.Fatalf("vnc --proxy-only -o json printed %q", line)
	}
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port.Port), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	greeting := make([]byte, 12)
	if _, err := io.ReadFull(conn, greeting); err != nil || string(greeting) != "RFB 003.008\n" {
		t.Errorf("vnc --proxy-only: first bytes %q (%v), want RFB 003.008", greeting, err)
	}

	// expose: a Pod reaches the guest's port 80 through the Service on port 8000.
	if out, code := virtctl(t, f, "", "expose", "vm", "vm", "--name", "web", "--port", "8000", "--target-port", "80"); code != 0 {
		t.Fatalf("expose: exit %d: %s", code, out)
	}
	svc := &corev1.Service{}
	if err := f.Client.Get(f.Context(), client.ObjectKey{Namespace: f.Namespace, Name: "web"}, svc); err != nil {
		t.Fatal(err)
	}
	f.Create(f.ProbePod("client", corev1.RestartPolicyNever, "fetch", "--url=http://"+svc.Spec.ClusterIP+":8000/", "--timeout=90s"))
	f.WaitForPodSucceeded("client", 2*time.Minute)
	if logs := f.PodLogs("client", ""); !strings.Contains(logs, "Podvirt demo guest") {
		t.Errorf("fetch through the exposed Service %s:8000 did not reach the guest; logs:\n%s", svc.Spec.ClusterIP, logs)
	}

	t.Setenv("PATH", "/nonexistent")
	if out, code := virtctl(t, f, "", "vnc", "vm"); code != 1 || !strings.Contains(out, "no VNC viewer found") || !strings.Contains(out, "--proxy-only") {
		t.Errorf("vnc without a viewer: exit %d, output %q", code, out)
	}
	if out, code := virtctl(t, f, "", "logs", "vm"); code != 0 || !strings.Contains(out, "Podvirt demo guest") {
		t.Errorf("logs: exit %d, output:\n%s", code, tail(out, 10))
	}
}

// TestVersionsAreThisCheckouts: virtctl and the deployed virt-api report the release stamped from
// this checkout at build time (hack/version.sh: gitVersion, gitCommit, gitTreeState, buildDate), in
// KubeVirt's virtctl's format, and never "(devel)".
func TestVersionsAreThisCheckouts(t *testing.T) {
	f := framework.New(t)
	requireVirtAPI(f)
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	commit := fmt.Sprintf(`GitCommit:"%s"`, strings.TrimSpace(string(head)))
	out, code := virtctl(t, f, "", "version")
	if code != 0 || !strings.Contains(out, "Client Version: version.Info{GitVersion:\"v") ||
		!strings.Contains(out, "Server Version: version.Info{GitVersion:\"v") ||
		strings.Count(out, commit) != 2 || strings.Contains(out, "(devel)") {
		t.Errorf("virtctl version: exit %d, want both versions stamped with %s, output:\n%s", code, commit, out)
	}
}
