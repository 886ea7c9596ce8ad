package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// hostPath is the PATH the components run with (runc, iptables, nft and ip live in sbin).
const hostPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// start runs a component detached (own session, stdin from /dev/null, output to its log file) and
// records its PID. A component that is already running is left alone.
func (c Config) start(comp component) error {
	if _, ok := c.running(comp.name); ok {
		return nil
	}
	for _, d := range []string{filepath.Dir(c.LogFile(comp.name)), filepath.Dir(c.pidFile(comp.name))} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	logf, err := os.OpenFile(c.LogFile(comp.name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s log: %w", comp.name, err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n==== %s starting %s\n", time.Now().Format(time.RFC3339), strings.Join(comp.argv, " "))
	argv := comp.argv
	if comp.node != nil {
		// nsenter opens both namespace files before entering either, then execs the component.
		argv = append([]string{"nsenter", "--net=" + filepath.Join(netnsRunDir, comp.node.netns()),
			"--mount=" + comp.node.mntns(), "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = c.StateDir
	cmd.Env = append(os.Environ(), "PATH="+hostPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	closeInheritedFDs()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", comp.name, err)
	}
	pid := cmd.Process.Pid
	exe, err := execedInto(pid, comp.argv[0])
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("start %s: %w\n--- last lines of %s:\n%s", comp.name, err, c.LogFile(comp.name), tail(c.LogFile(comp.name), 10))
	}
	if err := os.WriteFile(c.pidFile(comp.name), []byte(fmt.Sprintf("%d\n%s\n", pid, exe)), 0o644); err != nil {
		return fmt.Errorf("write %s pid file: %w", comp.name, err)
	}
	return cmd.Process.Release()
}

// execedInto waits until process pid runs the executable bin (a wrapper such as nsenter execs it
// after setting up) and returns the executable's path as /proc/PID/exe names it.
func execedInto(pid int, bin string) (string, error) {
	want, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return "", err
	}
	var exe string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if !processAlive(pid) {
			return "", fmt.Errorf("exited before running %s", bin)
		}
		exe, err = os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err == nil && exe == want {
			return exe, nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return "", fmt.Errorf("still runs %s, not %s, after 10 s", exe, want)
}

// running reports the PID of a component when its PID file names a live process running the
// recorded executable (so a reused PID is never mistaken for ours).
func (c Config) running(name string) (int, bool) {
	data, err := os.ReadFile(c.pidFile(name))
	if err != nil {
		return 0, false
	}
	fields := strings.Split(strings.TrimSpace(string(data)), "\n")
	pid, err := strconv.Atoi(fields[0])
	if err != nil || pid <= 1 || len(fields) < 2 {
		return 0, false
	}
	if !processAlive(pid) {
		return 0, false
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil || strings.TrimSuffix(exe, " (deleted)") != fields[1] {
		return 0, false
	}
	return pid, true
}

// processAlive is true for an existing process that is not a zombie.
func processAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// stop ends a component by its recorded PID: SIGTERM, then SIGKILL after grace.
func (c Config) stop(ctx context.Context, name string, grace time.Duration) error {
	pid, ok := c.running(name)
	if !ok {
		_ = os.Remove(c.pidFile(name))
		return nil
	}
	if err := killAndWait(ctx, pid, grace); err != nil {
		return fmt.Errorf("stop %s (pid %d): %w", name, pid, err)
	}
	return os.Remove(c.pidFile(name))
}

// killAndWait sends SIGTERM to pid, waits up to grace for it to exit, then sends SIGKILL.
func killAndWait(ctx context.Context, pid int, grace time.Duration) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	gone := func(context.Context) (bool, error) { return !processAlive(pid), nil }
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, grace, true, gone); err == nil {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, gone)
}

// processesMentioning lists live processes whose command line contains needle (our state
// directory or socket path: only processes started for this cluster match).
func processesMentioning(needle string) []procInfo {
	entries, _ := os.ReadDir("/proc")
	var out []procInfo
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || !processAlive(pid) {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		cmdline := strings.TrimSpace(strings.ReplaceAll(string(raw), "\x00", " "))
		argv0, _, _ := strings.Cut(string(raw), "\x00")
		if strings.Contains(cmdline, needle) && ours(argv0) {
			out = append(out, procInfo{pid: pid, cmdline: cmdline})
		}
	}
	return out
}

// ours reports whether a program is one the cluster runs (its daemons, containerd's shims, runc),
// so that a shell or make whose command line merely names the state dir is never killed or reported.
func ours(argv0 string) bool {
	base := filepath.Base(argv0)
	for _, prefix := range []string{"containerd", "kube", "etcd", "podvirt-cluster", "runc", "coredns"} {
		if strings.HasPrefix(base, prefix) {
			return true
		}
	}
	return false
}

// procInfo is a process found by processesMentioning.
type procInfo struct {
	pid     int
	cmdline string
}

func (p procInfo) String() string {
	cl := p.cmdline
	if len(cl) > 160 {
		cl = cl[:160] + "…"
	}
	return fmt.Sprintf("pid %d: %s", p.pid, cl)
}

// run executes a host command and returns its combined output; errors include the output.
func run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "PATH="+hostPath)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// execIn prepares a command in dir with the host PATH.
func execIn(ctx context.Context, dir, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	return cmd
}

func splitLines(s string) []string {
	return strings.Split(strings.TrimRight(s, "\n"), "\n")
}

// closeInheritedFDs marks every descriptor above stderr close-on-exec. Descriptors this process
// inherited (e.g. a flock(1) lock held by whoever ran us) would otherwise pass to the daemons and
// be held for as long as the cluster runs.
func closeInheritedFDs() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
