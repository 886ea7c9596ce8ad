//go:build launcher

package launcher_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"libvirt.org/go/libvirtxml"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// The launcher runs as this uid/gid, like the compute container (KubeVirt's qemu user).
const podUID = 107

// env is what every test shares: the built binary and the embedded driver's root (its capability
// cache survives from one launcher to the next, as it would in a Pod's writable layer… or not at all).
type env struct {
	dir  string // owned by the pod user: everything the launcher touches lives below it
	bin  string
	root string
	// hugepages is where each pod mounts a hugetlbfs of 2 MiB pages (a HugePages-2Mi emptyDir).
	hugepages string
	// passwd and group are the host's /etc/passwd and /etc/group plus the pod user and group, as the
	// launcher image has them; each pod mounts them over the host's (libvirt looks the user up).
	passwd, group string
}

var shared env // set once by TestMain, read-only afterwards

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "launcher integration tests need root (network/PID namespaces, uid switch): run `make launcher-test`")
		return 1
	}
	dir, err := os.MkdirTemp("", "pvl-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	shared.dir = dir
	shared.bin = filepath.Join(dir, "virt-launcher")
	build := exec.Command("go", "build", "-o", shared.bin, "github.com/podvirt/podvirt/cmd/virt-launcher")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build virt-launcher:", err)
		return 1
	}
	shared.passwd, shared.group = filepath.Join(dir, "passwd"), filepath.Join(dir, "group")
	for _, f := range []struct{ host, out, line string }{
		{"/etc/passwd", shared.passwd, fmt.Sprintf("qemu:x:%d:%d:qemu:/nonexistent:/usr/sbin/nologin", podUID, podUID)},
		{"/etc/group", shared.group, fmt.Sprintf("qemu:x:%d:", podUID)},
	} {
		if err := withPodUser(f.host, f.out, f.line); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	shared.root = filepath.Join(dir, "lv")
	shared.hugepages = filepath.Join(dir, "hugepages")
	for _, d := range []string{dir, shared.root, shared.hugepages} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := os.Chown(d, podUID, podUID); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// withPodUser writes the user database host to out with line added, unless host has the pod's id.
func withPodUser(host, out, line string) error {
	data, err := os.ReadFile(host)
	if err != nil {
		return err
	}
	if !strings.Contains(string(data), fmt.Sprintf(":x:%d:", podUID)) {
		data = append(data, line+"\n"...)
	}
	return os.WriteFile(out, data, 0o644)
}

// pod is one launcher process in its own network and PID namespaces, as uid 107: PID 1 of its PID
// namespace like in a container, so qemu dies with it whatever happens.
type pod struct {
	t       *testing.T
	name    string
	private string
	cmd     *exec.Cmd
	stderr  *os.File
	done    chan struct{} // closed when the launcher has exited; code is set then
	code    int
	client  *http.Client
}

// stateDir is where the pods of VMI ns/name find their persistent state volume (absent unless the
// test creates it).
func stateDir(name string) string { return filepath.Join(shared.dir, "state-"+name) }

// makeStateDir creates the persistent state volume of the pods of VMI ns/name.
func makeStateDir(t *testing.T, name string) {
	t.Helper()
	if err := os.MkdirAll(stateDir(name), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(stateDir(name), 0o777); err != nil { // a claim's directory is writable by the pod's fsGroup
		t.Fatal(err)
	}
}

// startPod starts `virt-launcher run` for VMI ns/name with a fresh private dir.
func startPod(t *testing.T, name string, extraArgs ...string) *pod {
	t.Helper()
	return startPodAt(t, name, "", extraArgs...)
}

// startPodAt is startPod with the private dir mounted at podDir inside the pod (when not empty), so
// that two pods see their own private dirs at the same path, as launcherv1.PrivateDir is in every
// launcher Pod (a live migration relies on it).
func startPodAt(t *testing.T, name, podDir string, extraArgs ...string) *pod {
	t.Helper()
	// Not t.TempDir(): its parent is 0700 root, which the pod user cannot enter.
	private, err := os.MkdirTemp(shared.dir, name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(private) })
	if err := os.Chmod(private, 0o777); err != nil { // an emptyDir is world-writable
		t.Fatal(err)
	}
	stderr, err := os.Create(filepath.Join(t.TempDir(), "launcher.log"))
	if err != nil {
		t.Fatal(err)
	}
	// No node agent polls these launchers: no fencing, unless the test asks (a later flag wins).
	// Like the Pod: loopback up, and the safe sysctl that lets the non-root launcher forward ports < 1024.
	// The persistent state volume, if the test made it (stateDir), outlives the pod.
	mountPrivate, inPod := "", private
	if podDir != "" {
		mountPrivate, inPod = fmt.Sprintf("mount --bind %s %s && ", private, podDir), podDir
	}
	script := fmt.Sprintf("ip link set lo up && sysctl -qw net.ipv4.ip_unprivileged_port_start=0 && mount --bind %s /etc/passwd && mount --bind %s /etc/group && mount -t hugetlbfs -o pagesize=2M,mode=1777 hugetlbfs %s && %sexec setpriv --reuid %d --regid %d --clear-groups %s run --vmi-name %s --namespace ns --private-dir %s --libvirt-root %s --state-dir %s --hugepages-dir %s --fence-after 0 %s",
		shared.passwd, shared.group, shared.hugepages, mountPrivate, podUID, podUID, shared.bin, name, inPod, shared.root, stateDir(name), shared.hugepages, strings.Join(extraArgs, " "))
	cmd := exec.Command("unshare", "--mount", "--net", "--pid", "--fork", "--mount-proc", "--kill-child", "sh", "-c", script)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &pod{t: t, name: name, private: private, cmd: cmd, stderr: stderr, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		p.code = launcherExitCode(cmd.ProcessState)
		close(p.done)
	}()
	p.client = &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", filepath.Join(private, launcherv1.CommandSocket))
		},
	}}
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			// The launcher is PID 1 of its PID namespace: killing it takes qemu with it. (unshare's
			// --kill-child does not survive setpriv's uid change, so kill the launcher itself.)
			for _, pid := range childrenOf(cmd.Process.Pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			_ = cmd.Process.Kill()
			<-p.done
		}
		stderr.Close()
		if t.Failed() {
			log, _ := os.ReadFile(stderr.Name())
			t.Logf("launcher log:\n%s", log)
		}
	})
	waitFor(t, 30*time.Second, "the command socket", func() bool {
		code, _ := p.call(http.MethodGet, launcherv1.PathPing, nil)
		return code == http.StatusOK
	})
	return p
}

// launcherExitCode is the launcher's exit code as unshare passes it on (it exits with its child's code).
func launcherExitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// call sends a request; body is JSON-encoded unless it is already []byte.
func (p *pod) call(method, path string, body any) (int, []byte) {
	var r io.Reader
	if body != nil {
		data, ok := body.([]byte)
		if !ok {
			var err error
			if data, err = json.Marshal(body); err != nil {
				p.t.Fatal(err)
			}
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, "http://launcher"+path, r)
	if err != nil {
		p.t.Fatal(err)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// must sends a request and fails the test unless the reply has code; it returns the Status.
func (p *pod) must(code int, method, path string, body any) launcherv1.Status {
	p.t.Helper()
	got, out := p.call(method, path, body)
	if got != code {
		p.t.Fatalf("%s %s: %d %s, want %d", method, path, got, out, code)
	}
	var st launcherv1.Status
	_ = json.Unmarshal(out, &st)
	return st
}

func (p *pod) status() launcherv1.Status {
	return p.must(http.StatusOK, http.MethodGet, launcherv1.PathStatus, nil)
}

func (p *pod) sync(vmi *virtv1.VirtualMachineInstance) launcherv1.Status {
	p.t.Helper()
	data, err := json.Marshal(vmi)
	if err != nil {
		p.t.Fatal(err)
	}
	return p.must(http.StatusOK, http.MethodPost, launcherv1.PathSync, launcherv1.SyncRequest{VMI: data, Emulation: true})
}

// waitExit waits for the launcher to exit and returns its code and final status (the exit file).
func (p *pod) waitExit(timeout time.Duration) (int, launcherv1.Status) {
	p.t.Helper()
	select {
	case <-p.done:
		code := p.code
		var st launcherv1.Status
		data, err := os.ReadFile(filepath.Join(p.private, launcherv1.ExitFile))
		if err != nil {
			p.t.Fatalf("launcher exited %d without an exit file: %v", code, err)
		}
		if err := json.Unmarshal(data, &st); err != nil {
			p.t.Fatalf("exit file: %v", err)
		}
		return code, st
	case <-time.After(timeout):
		p.t.Fatalf("launcher still running after %s (status %+v)", timeout, p.status())
	}
	return 0, launcherv1.Status{}
}

// childrenOf lists pid's children, whichever of its threads started them (a Go process forks from
// any thread, and /proc/PID/task/TID/children lists only that thread's).
func childrenOf(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, task := range tasks {
		data, _ := os.ReadFile(task)
		for _, f := range strings.Fields(string(data)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// launcherPID is PID 1 of the launcher's namespace as seen from the test (the child of unshare): the
// launcher's init, which forwards signals to the launcher and is qemu's parent.
func (p *pod) launcherPID() int {
	p.t.Helper()
	kids := childrenOf(p.cmd.Process.Pid)
	if len(kids) == 0 {
		p.t.Fatal("unshare has no child")
	}
	return kids[0]
}

// qemuPID is qemu's PID as seen from the test.
func (p *pod) qemuPID() int {
	p.t.Helper()
	for _, pid := range childrenOf(p.launcherPID()) {
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); strings.Contains(exe, "qemu-system") {
			return pid
		}
	}
	p.t.Fatal("no qemu child of the launcher")
	return 0
}

// liveDomain is the domain as libvirt runs it: the embedded driver's status file.
func (p *pod) liveDomain() *libvirtxml.Domain {
	p.t.Helper()
	data, err := os.ReadFile(filepath.Join(shared.root, "run", "qemu", "ns_"+p.name+".xml"))
	if err != nil {
		p.t.Fatal(err)
	}
	s := string(data)
	start, end := strings.Index(s, "<domain "), strings.LastIndex(s, "</domain>")
	if start < 0 || end < 0 {
		p.t.Fatalf("no <domain> in the status file:\n%s", s)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(s[start : end+len("</domain>")]); err != nil {
		p.t.Fatal(err)
	}
	return &d
}

// dialInPod connects to addr from inside the launcher's network namespace (the Pod's), sends req when
// it is not empty, and returns what comes back until the peer closes.
func (p *pod) dialInPod(network, addr, req string) (string, error) {
	p.t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		p.t.Fatal(err)
	}
	defer self.Close()
	target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", p.launcherPID()))
	if err != nil {
		p.t.Fatal(err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		p.t.Fatal(err)
	}
	c, err := net.DialTimeout(network, addr, 5*time.Second)
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		panic(err) // a thread left in the wrong namespace must not be reused
	}
	if err != nil {
		return "", err
	}
	defer c.Close()
	if req == "" {
		return "", nil
	}
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		return "", err
	}
	out, err := io.ReadAll(c)
	return string(out), err
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// waitLog waits until the file at path contains want.
func waitLog(t *testing.T, timeout time.Duration, path, want string) {
	t.Helper()
	var data []byte
	defer func() {
		if t.Failed() {
			t.Logf("%s ends with:\n%q", filepath.Base(path), data[max(0, len(data)-1500):])
		}
	}()
	waitFor(t, timeout, fmt.Sprintf("%q in %s", want, filepath.Base(path)), func() bool {
		data, _ = os.ReadFile(path)
		return bytes.Contains(data, []byte(want))
	})
}
