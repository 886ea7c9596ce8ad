// Package pid1 lets the launcher run as a container's PID 1. libvirt starts qemu daemonized (double
// fork), so qemu — and every capability-probe qemu — is re-parented to PID 1 when its starter exits.
// A PID 1 that does not reap them leaves zombies, and libvirt, which waits for a probe qemu to
// disappear, hangs. Reaping with wait(-1) inside the launcher would steal exit statuses that libvirt
// and os/exec wait for, so PID 1 instead becomes a minimal init: it runs the real launcher as its only
// child, forwards signals to it, reaps every orphan, and exits with the child's code (the kernel then
// kills whatever is left in the PID namespace).
package pid1

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// IsInit reports whether this process is PID 1 of its PID namespace.
func IsInit() bool { return os.Getpid() == 1 }

// Run runs this executable again with args as the only child, and returns its exit code once it has
// exited. Meanwhile it reaps orphans and forwards SIGTERM, SIGINT, SIGHUP and SIGQUIT to the child.
func Run(args []string) (int, error) {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	child := exec.Command("/proc/self/exe", args...)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := child.Start(); err != nil {
		return 1, fmt.Errorf("start launcher: %w", err)
	}
	pid := child.Process.Pid
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			_ = child.Process.Signal(sig)
			continue
		}
		for {
			var ws syscall.WaitStatus
			got, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil || got <= 0 {
				break
			}
			if got == pid {
				if ws.Signaled() {
					return 128 + int(ws.Signal()), nil
				}
				return ws.ExitStatus(), nil
			}
		}
	}
	return 1, errors.New("signal channel closed")
}
