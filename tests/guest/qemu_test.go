//go:build guestboot

package guest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// consoleLog collects a VM's serial output and wakes waiters on every write.
type consoleLog struct {
	mu      sync.Mutex
	buf     []byte
	changed chan struct{}
	closed  bool
}

func newConsoleLog() *consoleLog { return &consoleLog{changed: make(chan struct{})} }

func (c *consoleLog) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = append(c.buf, p...)
	close(c.changed)
	c.changed = make(chan struct{})
	return len(p), nil
}

// close marks the end of output (the VM exited) and wakes every waiter.
func (c *consoleLog) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *consoleLog) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.buf)
}

// waitFor waits until re matches the output after offset from; it returns the submatches and the
// offset just past the match.
func (c *consoleLog) waitFor(ctx context.Context, re *regexp.Regexp, from int) ([]string, int, error) {
	for {
		c.mu.Lock()
		if loc := re.FindSubmatchIndex(c.buf[from:]); loc != nil {
			m := make([]string, len(loc)/2)
			for i := range m {
				if loc[2*i] >= 0 {
					m[i] = string(c.buf[from+loc[2*i] : from+loc[2*i+1]])
				}
			}
			c.mu.Unlock()
			return m, from + loc[1], nil
		}
		closed, ch := c.closed, c.changed
		c.mu.Unlock()
		if closed {
			return nil, from, fmt.Errorf("console closed before %q appeared", re)
		}
		select {
		case <-ctx.Done():
			return nil, from, fmt.Errorf("wait for %q: %w", re, ctx.Err())
		case <-ch:
		}
	}
}

// vm is one qemu process with its serial console on stdin/stdout and a QMP socket.
type vm struct {
	cmd     *exec.Cmd
	console *consoleLog
	stderr  bytes.Buffer
	stdin   interface{ Write([]byte) (int, error) }
	qmp     string
	started time.Time
	exited  chan struct{} // closed once qemu has exited and its output is drained
	waitErr error
}

// startVM starts qemu-system-x86_64 with args plus a serial console on stdio and a QMP socket.
// A cleanup kills qemu if the test did not shut it down, waits for it and logs the console on failure.
func startVM(t *testing.T, args ...string) *vm {
	t.Helper()
	v := &vm{console: newConsoleLog(), qmp: filepath.Join(t.TempDir(), "qmp.sock"), exited: make(chan struct{})}
	all := append([]string{"-nodefaults", "-no-user-config", "-display", "none", "-serial", "stdio",
		"-qmp", "unix:" + v.qmp + ",server=on,wait=off"}, args...)
	v.cmd = exec.Command("qemu-system-x86_64", all...)
	v.cmd.Stdout = v.console
	v.cmd.Stderr = &v.stderr
	stdin, err := v.cmd.StdinPipe()
	if err != nil {
		t.Fatalf("qemu stdin: %v", err)
	}
	v.stdin = stdin
	t.Logf("qemu-system-x86_64 %s", strings.Join(all, " "))
	v.started = time.Now()
	if err := v.cmd.Start(); err != nil {
		t.Fatalf("start qemu: %v", err)
	}
	go func() {
		v.waitErr = v.cmd.Wait()
		v.console.close()
		close(v.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-v.exited:
		default:
			_ = v.cmd.Process.Kill()
			<-v.exited
		}
		if t.Failed() {
			t.Logf("serial console:\n%s\nqemu stderr:\n%s", v.console.String(), v.stderr.String())
		}
	})
	return v
}

// send types a line on the serial console.
func (v *vm) send(t *testing.T, line string) {
	t.Helper()
	if _, err := v.stdin.Write([]byte(line + "\n")); err != nil {
		t.Fatalf("write to serial console: %v", err)
	}
}

// powerdown presses the ACPI power button through QMP (system_powerdown, what libvirt's shutdown does).
func (v *vm) powerdown(ctx context.Context) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", v.qmp)
	if err != nil {
		return fmt.Errorf("dial qmp: %w", err)
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	r := bufio.NewReader(conn)
	if _, err := r.ReadBytes('\n'); err != nil { // greeting
		return fmt.Errorf("read qmp greeting: %w", err)
	}
	for _, command := range []string{"qmp_capabilities", "system_powerdown"} {
		if err := qmpExecute(conn, r, command); err != nil {
			return err
		}
	}
	return nil
}

// qmpExecute sends one QMP command and reads replies, skipping events, until its return or error.
func qmpExecute(conn net.Conn, r *bufio.Reader, command string) error {
	if _, err := fmt.Fprintf(conn, "{\"execute\":%q}\n", command); err != nil {
		return fmt.Errorf("send qmp %s: %w", command, err)
	}
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("read qmp %s reply: %w", command, err)
		}
		var reply struct {
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Desc string `json:"desc"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &reply); err != nil {
			return fmt.Errorf("decode qmp reply %q: %w", line, err)
		}
		if reply.Error != nil {
			return fmt.Errorf("qmp %s: %s", command, reply.Error.Desc)
		}
		if reply.Return != nil {
			return nil
		}
	}
}

// waitExit waits for qemu to exit and returns its exit error (nil for status 0).
func (v *vm) waitExit(ctx context.Context) error {
	select {
	case <-v.exited:
		return v.waitErr
	case <-ctx.Done():
		return fmt.Errorf("wait for qemu to exit: %w", ctx.Err())
	}
}

// peakRSS returns qemu's peak resident set size in KiB (VmHWM), read while it runs.
func (v *vm) peakRSS() (int, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", v.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("read qemu status: %w", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
		}
	}
	return 0, errors.New("no VmHWM in qemu status")
}
