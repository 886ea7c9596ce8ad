// Package launchertest serves the launcher's command protocol v1 (api/launcher/v1) on a real unix socket
// with a scripted guest instead of libvirt, for tests of the protocol's clients (the node agent). It is
// the test double at the one boundary that is not Kubernetes: what it records (syncs, shutdowns) is
// what a client really sent over the socket.
package launchertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// Launcher is a protocol v1 server whose guest is a state machine: Sync starts it (Running, or Paused
// with startStrategy Paused), Pause/Unpause toggle it, Shutdown moves it to ShuttingDown (the test
// decides when it reaches Shutoff with SetState), Kill crashes it. Safe for concurrent use.
type Launcher struct {
	mu        sync.Mutex
	status    launcherv1.Status
	syncs     []launcherv1.SyncRequest
	shutdowns []launcherv1.ShutdownRequest
	kills     int
	reboots   int
	resets    int
	polls     []time.Time
	vouches   []string // each status request's launcherv1.HeaderVouchedUntil ("" when absent)
	stalled   bool
	held      chan struct{} // while open, syncs wait for it (HoldSyncs)
	holding   int

	dir       string
	srv       *http.Server
	served    chan error
	closeOnce sync.Once
	closeErr  error
}

// Start listens on dir/launcherv1.CommandSocket (dir is created if missing; paths longer than a unix
// socket address may be are bound through /proc/self/fd) and serves until Close.
func Start(dir string) (*Launcher, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create launcher dir: %w", err)
	}
	ln, err := listen(dir)
	if err != nil {
		return nil, err
	}
	l := &Launcher{dir: dir, served: make(chan error, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+launcherv1.PathPing, l.ping)
	mux.HandleFunc("POST "+launcherv1.PathSync, l.sync)
	mux.HandleFunc("POST "+launcherv1.PathShutdown, l.shutdown)
	mux.HandleFunc("POST "+launcherv1.PathKill, l.kill)
	mux.HandleFunc("POST "+launcherv1.PathPause, l.pause)
	mux.HandleFunc("POST "+launcherv1.PathUnpause, l.unpause)
	mux.HandleFunc("POST "+launcherv1.PathReboot, func(w http.ResponseWriter, _ *http.Request) { l.press(w, "rebooted", &l.reboots) })
	mux.HandleFunc("POST "+launcherv1.PathReset, func(w http.ResponseWriter, _ *http.Request) { l.press(w, "reset", &l.resets) })
	mux.HandleFunc("GET "+launcherv1.PathStatus, l.getStatus)
	l.srv = &http.Server{Handler: mux}
	go func() { l.served <- l.srv.Serve(ln) }()
	return l, nil
}

func listen(dir string) (net.Listener, error) {
	path := filepath.Join(dir, launcherv1.CommandSocket)
	_ = os.Remove(path)
	if len(path) <= 107 {
		ln, err := net.Listen("unix", path)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", path, err)
		}
		return ln, nil
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	defer func() { _ = unix.Close(fd) }()
	ln, err := net.Listen("unix", fmt.Sprintf("/proc/self/fd/%d/%s", fd, launcherv1.CommandSocket))
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// The listener would unlink its (fd-relative, soon dangling) name on Close; the test's temp dir
	// removes the socket instead.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	return ln, nil
}

// Close stops serving (the socket stops accepting, as when the launcher exits) and waits for the
// server. Calling it again returns the first call's result.
func (l *Launcher) Close() error {
	l.closeOnce.Do(func() {
		if err := l.srv.Shutdown(context.Background()); err != nil {
			l.closeErr = fmt.Errorf("shut down launcher double: %w", err)
		}
		if err := <-l.served; err != nil && !errors.Is(err, http.ErrServerClosed) && l.closeErr == nil {
			l.closeErr = fmt.Errorf("serve launcher double: %w", err)
		}
	})
	return l.closeErr
}

// Exit ends the launcher as the real one does when its guest is gone: it stops serving and leaves its
// final status in launcherv1.ExitFile.
func (l *Launcher) Exit(final launcherv1.Status) error {
	if err := l.Close(); err != nil {
		return err
	}
	raw, err := json.Marshal(final)
	if err != nil {
		return fmt.Errorf("encode exit status: %w", err)
	}
	if err := os.WriteFile(filepath.Join(l.dir, launcherv1.ExitFile), raw, 0o644); err != nil {
		return fmt.Errorf("write exit file: %w", err)
	}
	return nil
}

// SetState scripts the guest: it moves to state with the given reason and message (e.g. Shutoff after a
// guest power-off, Crashed when qemu dies).
func (l *Launcher) SetState(state launcherv1.DomainState, reason, message string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.status.State, l.status.Reason, l.status.Message = state, reason, message
}

// Status is the guest's current status.
func (l *Launcher) Status() launcherv1.Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.status
}

// Syncs are the sync requests received so far.
func (l *Launcher) Syncs() []launcherv1.SyncRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]launcherv1.SyncRequest(nil), l.syncs...)
}

// Shutdowns are the shutdown requests received so far.
func (l *Launcher) Shutdowns() []launcherv1.ShutdownRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]launcherv1.ShutdownRequest(nil), l.shutdowns...)
}

// Kills is how many kill requests were received.
func (l *Launcher) Kills() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.kills
}

// Reboots is how many reboot requests were received.
func (l *Launcher) Reboots() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reboots
}

// Resets is how many reset requests were received.
func (l *Launcher) Resets() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.resets
}

// press counts a reboot or reset request in count; only a running guest may be rebooted or reset
// (as the real launcher).
func (l *Launcher) press(w http.ResponseWriter, done string, count *int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.status.State != launcherv1.DomainRunning {
		replyError(w, http.StatusConflict, fmt.Sprintf("the guest is %s, not running: it cannot be %s", l.status.State, done))
		return
	}
	*count++
	w.WriteHeader(http.StatusAccepted)
}

func (l *Launcher) ping(w http.ResponseWriter, _ *http.Request) {
	reply(w, http.StatusOK, map[string]string{"version": launcherv1.Version})
}

// HoldSyncs makes sync requests wait, as a launcher preparing a slow start would, until release is
// called (or their callers give up).
func (l *Launcher) HoldSyncs() (release func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	held := make(chan struct{})
	l.held = held
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.held = nil
			l.mu.Unlock()
			close(held)
		})
	}
}

// SyncsHeld is how many sync requests HoldSyncs holds now.
func (l *Launcher) SyncsHeld() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holding
}

// Vouches are the launcherv1.HeaderVouchedUntil of each status request answered so far ("" when
// it had none).
func (l *Launcher) Vouches() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.vouches)
}

func (l *Launcher) sync(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	held := l.held
	if held != nil {
		l.holding++
	}
	l.mu.Unlock()
	if held != nil {
		select {
		case <-held:
		case <-r.Context().Done():
		}
		l.mu.Lock()
		l.holding--
		l.mu.Unlock()
	}
	var req launcherv1.SyncRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		replyError(w, http.StatusBadRequest, "decode sync request: "+err.Error())
		return
	}
	var vmi virtv1.VirtualMachineInstance
	if err := json.Unmarshal(req.VMI, &vmi); err != nil {
		replyError(w, http.StatusBadRequest, "decode vmi: "+err.Error())
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.syncs = append(l.syncs, req)
	if l.status.State == launcherv1.DomainNone {
		l.status = launcherv1.Status{State: launcherv1.DomainRunning, Emulation: req.Emulation, QemuPID: 42, Interfaces: interfaces(&vmi)}
		if vmi.Spec.StartStrategy != nil && *vmi.Spec.StartStrategy == virtv1.StartStrategyPaused {
			l.status.State = launcherv1.DomainPaused
		}
	}
	reply(w, http.StatusOK, l.status)
}

// interfaces invents a MAC for every interface of the VMI (the default pod network when it has none).
func interfaces(vmi *virtv1.VirtualMachineInstance) []launcherv1.Interface {
	names := []string{"default"}
	if spec := vmi.Spec.Domain.Devices.Interfaces; len(spec) > 0 {
		names = names[:0]
		for _, i := range spec {
			names = append(names, i.Name)
		}
	}
	out := make([]launcherv1.Interface, 0, len(names))
	for n, name := range names {
		out = append(out, launcherv1.Interface{Name: name, MAC: fmt.Sprintf("02:00:00:00:00:%02x", n+1), IPs: []string{"10.0.2.2"}})
	}
	return out
}

func (l *Launcher) shutdown(w http.ResponseWriter, r *http.Request) {
	var req launcherv1.ShutdownRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		replyError(w, http.StatusBadRequest, "decode shutdown request: "+err.Error())
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.shutdowns = append(l.shutdowns, req)
	switch {
	case l.status.State == launcherv1.DomainRunning, l.status.State == launcherv1.DomainPaused,
		l.status.State == launcherv1.DomainShuttingDown && l.status.Reason == launcherv1.ReasonTerminated:
		l.status.State, l.status.Reason = launcherv1.DomainShuttingDown, launcherv1.ReasonShutdownRequested
	}
	w.WriteHeader(http.StatusAccepted)
}

func (l *Launcher) kill(w http.ResponseWriter, _ *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.kills++
	if l.status.State != launcherv1.DomainNone {
		l.status.State, l.status.Reason, l.status.Message = launcherv1.DomainCrashed, launcherv1.ReasonKilled, "the guest was killed on request"
	}
	w.WriteHeader(http.StatusAccepted)
}

func (l *Launcher) pause(w http.ResponseWriter, _ *http.Request) {
	l.toggle(w, launcherv1.DomainRunning, launcherv1.DomainPaused)
}

func (l *Launcher) unpause(w http.ResponseWriter, _ *http.Request) {
	l.toggle(w, launcherv1.DomainPaused, launcherv1.DomainRunning)
}

func (l *Launcher) toggle(w http.ResponseWriter, from, to launcherv1.DomainState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.status.State != from {
		replyError(w, http.StatusConflict, fmt.Sprintf("guest is %q, not %q", l.status.State, from))
		return
	}
	l.status.State, l.status.Reason = to, ""
	reply(w, http.StatusOK, l.status)
}

// Stall makes the launcher stop answering status requests, as one whose process a tenant stopped:
// each is held until its caller gives up.
func (l *Launcher) Stall() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stalled = true
}

// Polls are the times of the status requests answered so far.
func (l *Launcher) Polls() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.polls)
}

func (l *Launcher) getStatus(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	stalled := l.stalled
	if !stalled {
		l.polls = append(l.polls, time.Now())
		l.vouches = append(l.vouches, r.Header.Get(launcherv1.HeaderVouchedUntil))
	}
	l.mu.Unlock()
	if stalled {
		<-r.Context().Done()
		return
	}
	reply(w, http.StatusOK, l.Status())
}

func reply(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

func replyError(w http.ResponseWriter, code int, msg string) {
	reply(w, code, launcherv1.Error{Message: msg})
}
