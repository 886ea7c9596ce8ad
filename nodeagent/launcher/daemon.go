package launcher

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
)

// libvirtdConf is the migration target's libvirtd.conf: it listens on one unix socket in
// MigrationDir (%[1]s), which only the Pod's user and the node agent (root) can open, and trusts
// whoever can; no TCP, no TLS. Its log goes to the launcher's stderr, errors only.
const libvirtdConf = `unix_sock_dir = %[1]q
unix_sock_rw_perms = "0700"
auth_unix_rw = "none"
auth_unix_ro = "none"
log_outputs = "4:stderr"
`

// libvirtdPath is libvirt's daemon, in the launcher image as on Debian.
const libvirtdPath = "/usr/sbin/libvirtd"

// daemonStartTimeout bounds how long libvirtd may take to listen.
const daemonStartTimeout = 20 * time.Second

// daemon is the libvirt daemon a migration target's launcher runs as its own user (a session
// daemon): the source's libvirt reaches it through the node agents to prepare the incoming guest
// and to finish the migration (the embedded driver has no RPC), and the launcher manages the
// arrived guest through it.
type daemon struct {
	cmd  *exec.Cmd
	done chan struct{}
	hv   *hypervisor
}

// startDaemon writes the daemon's configuration under the launcher's libvirt root (its session
// directories are there too, see PrepareLibvirtEnv), starts libvirtd and connects to it once it
// listens.
func startDaemon(ctx context.Context, cfg *Config) (*daemon, error) {
	sockDir := filepath.Join(cfg.PrivateDir, launcherv1.MigrationDir)
	if err := os.MkdirAll(sockDir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", sockDir, err)
	}
	sock := filepath.Join(sockDir, launcherv1.MigrationLibvirtSocket)
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale %s: %w", sock, err)
	}
	conf := filepath.Join(cfg.LibvirtRoot, "libvirtd.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, libvirtdConf, sockDir), 0o600); err != nil {
		return nil, fmt.Errorf("write libvirtd.conf: %w", err)
	}
	// The session daemon reads qemu.conf from $XDG_CONFIG_HOME/libvirt (set by PrepareLibvirtEnv).
	if err := writeQemuConf(filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "libvirt", "qemu.conf"), cfg.HugepagesDir); err != nil {
		return nil, err
	}
	cmd := exec.Command(libvirtdPath, "-f", conf)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start libvirtd: %w", err)
	}
	d := &daemon{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(d.done) }()
	if err := d.awaitSocket(ctx, sock); err != nil {
		d.stop()
		return nil, err
	}
	hv, err := connect("qemu+unix:///session?socket="+sock, filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "libvirt", "qemu", "run"))
	if err != nil {
		d.stop()
		return nil, err
	}
	d.hv = hv
	return d, nil
}

// awaitSocket waits until libvirtd accepts connections on sock.
func (d *daemon) awaitSocket(ctx context.Context, sock string) error {
	ctx, cancel := context.WithTimeout(ctx, daemonStartTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-d.done:
			return fmt.Errorf("libvirtd exited before listening: %s", d.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("libvirtd did not listen on %s: %w", sock, ctx.Err())
		case <-tick.C:
		}
	}
}

// close destroys the guests it runs, disconnects and stops the daemon.
func (d *daemon) close() {
	if d.hv != nil {
		d.hv.close()
	}
	d.stop()
}

// stop terminates libvirtd and waits for it (killed after 10 s).
func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}
