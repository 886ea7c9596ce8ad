package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"libvirt.org/go/libvirt"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	"github.com/podvirt/podvirt/internal/atomicfile"
)

// Exit codes of `virt-launcher run`.
const (
	// ExitShutoff: the guest powered off (or a requested shutdown completed): VMI Succeeded.
	ExitShutoff = 0
	// ExitError: the launcher itself failed (bad flags, libvirt would not start, …).
	ExitError = 1
	// ExitCrashed: qemu died or the guest crashed: VMI Failed.
	ExitCrashed = 2
	// ExitKilled: the guest was killed on request (/v1/kill): VMI Failed.
	ExitKilled = 3
)

// Config is how `virt-launcher run` is set up.
type Config struct {
	// VMIName and Namespace identify the one VMI this launcher runs; a sync for another is refused.
	VMIName, Namespace string
	// PrivateDir is launcherv1.PrivateDir in a Pod.
	PrivateDir string
	// PVCRoot is launcherv1.PVCMountRoot in a Pod.
	PVCRoot string
	// SecretsDir is launcherv1.SecretMountRoot in a Pod.
	SecretsDir string
	// StateDir is launcherv1.PersistentStateDir in a Pod: the VM's persistent state (a persistent TPM's).
	StateDir string
	// HugepagesDir is launcherv1.HugepagesDir in a Pod: a hugetlbfs when the guest's memory is in huge pages.
	HugepagesDir string
	// LibvirtRoot is the embedded driver's private directory (writable, container-local).
	LibvirtRoot string
	// QemuImg is the qemu-img binary.
	QemuImg string
	// FenceAfter is how long a running guest may go without any request from the node agent before
	// the launcher destroys it (launcherv1.AgentSilenceLimit; 0 never).
	FenceAfter time.Duration
	// KubeletTokenDir holds the token for virt-api's kubelet-lease check (launcherv1.KubeletTokenDir
	// when empty).
	KubeletTokenDir string
	// Log receives the launcher's own log.
	Log *slog.Logger
}

// Run serves the command protocol until the guest, once started, is gone; ctx ending (SIGTERM) shuts
// the guest down gracefully first. It returns the process exit code (see the Exit constants).
func Run(ctx context.Context, cfg Config) int {
	st, err := run(ctx, &cfg)
	if err != nil {
		cfg.Log.Error("Launcher failed", "err", err)
		st = launcherv1.Status{State: launcherv1.DomainCrashed, Reason: "LauncherError", Message: err.Error()}
		writeExitFile(&cfg, st)
		return ExitError
	}
	writeExitFile(&cfg, st)
	switch {
	case st.State == launcherv1.DomainShutoff || st.State == launcherv1.DomainNone || st.State == launcherv1.DomainMigrated:
		return ExitShutoff
	case st.Reason == launcherv1.ReasonKilled:
		return ExitKilled
	default:
		return ExitCrashed
	}
}

func run(ctx context.Context, cfg *Config) (launcherv1.Status, error) {
	if err := os.MkdirAll(cfg.PrivateDir, 0o755); err != nil {
		return launcherv1.Status{}, fmt.Errorf("create private dir: %w", err)
	}
	_ = os.Remove(filepath.Join(cfg.PrivateDir, launcherv1.ExitFile))
	start := time.Now()
	events, err := startEventLoop()
	if err != nil {
		return launcherv1.Status{}, err
	}
	defer events.close()
	hv, err := openEmbedded(cfg.LibvirtRoot, cfg.HugepagesDir)
	if err != nil {
		return launcherv1.Status{}, err
	}
	defer hv.close()
	cfg.Log.Info("Embedded libvirt ready", "uri", EmbedURI(cfg.LibvirtRoot), "took", time.Since(start).Round(time.Millisecond).String())
	g := newGuest(cfg, hv)
	checkCtx, stopChecking := context.WithCancel(ctx)
	checked := make(chan struct{})
	go func() { defer close(checked); g.kubelet.run(checkCtx) }()
	defer func() { stopChecking(); <-checked }()
	warmCtx, stopWarming := context.WithCancel(ctx)
	warmed := make(chan struct{})
	go func() { defer close(warmed); warmUp(warmCtx, cfg, hv, g.synced) }()
	defer func() { stopWarming(); <-warmed }()

	sockPath := filepath.Join(cfg.PrivateDir, launcherv1.CommandSocket)
	_ = os.Remove(sockPath) // a socket left by an earlier launcher in the same Pod
	ln, err := net.Listen("unix", sockPath)
	if err != nil {
		return launcherv1.Status{}, fmt.Errorf("listen on %s: %w", sockPath, err)
	}
	srv := &http.Server{Handler: g.heard(newHandler(g)), ReadHeaderTimeout: 10 * time.Second, ConnContext: peerContext}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	cfg.Log.Info("Serving the command protocol", "socket", sockPath, "version", launcherv1.Version)

	st, loopErr := g.loop(ctx)
	if g.target != nil {
		g.target.close()
	}

	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) && loopErr == nil {
		loopErr = fmt.Errorf("serve command protocol: %w", err)
	}
	return st, loopErr
}

// writeExitFile leaves the final status in the private dir for the console-log container and the node agent.
func writeExitFile(cfg *Config, st launcherv1.Status) {
	data, err := json.Marshal(st)
	if err == nil {
		err = atomicfile.WriteFile(filepath.Join(cfg.PrivateDir, launcherv1.ExitFile), data, 0o644)
	}
	if err != nil {
		cfg.Log.Error("Writing the exit file", "err", err)
	}
}

// stateOf maps a libvirt state to the protocol's.
func stateOf(s libvirt.DomainState) launcherv1.DomainState {
	switch s {
	case libvirt.DOMAIN_RUNNING, libvirt.DOMAIN_BLOCKED:
		return launcherv1.DomainRunning
	case libvirt.DOMAIN_PAUSED, libvirt.DOMAIN_PMSUSPENDED:
		return launcherv1.DomainPaused
	case libvirt.DOMAIN_SHUTDOWN:
		return launcherv1.DomainShuttingDown
	case libvirt.DOMAIN_CRASHED:
		return launcherv1.DomainCrashed
	default:
		return launcherv1.DomainShutoff
	}
}
