package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/nodeagent"
)

// writeCounter counts one component's write requests to the apiserver by verb, resource and
// response code (so optimistic-lock conflicts, 409, are measured rather than inferred).
type writeCounter struct {
	mu     sync.Mutex
	counts map[writeKey]int
	last   time.Time
}

type writeKey struct {
	verb, resource string
	code           int
}

func newWriteCounter() *writeCounter { return &writeCounter{counts: map[writeKey]int{}} }

func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if req.Method != http.MethodGet {
			code := 0 // no response at all
			if resp != nil {
				code = resp.StatusCode
			}
			w.mu.Lock()
			w.counts[writeKey{req.Method, resourceOf(req.URL.Path), code}]++
			w.last = time.Now()
			w.mu.Unlock()
		}
		return resp, err
	})
}

// reset returns the counts so far and starts again from zero.
func (w *writeCounter) reset() map[writeKey]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.counts
	w.counts = map[writeKey]int{}
	return c
}

// quietFor reports whether no write was made during the last d.
func (w *writeCounter) quietFor(d time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return time.Since(w.last) >= d
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// resourceOf reduces /apis/g/v/namespaces/ns/res/name/sub to res/sub.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, p := range parts {
		if p == "namespaces" && i+2 < len(parts) {
			rest := parts[i+2:]
			if len(rest) >= 3 {
				return rest[0] + "/" + rest[2]
			}
			return rest[0]
		}
	}
	return path
}

// writeTotals sums counts: state writes (not Events, not the heartbeat Lease), Events, conflicts.
type writeTotals struct{ state, events, leases, conflicts int }

func totals(counts map[writeKey]int) writeTotals {
	var t writeTotals
	for k, n := range counts {
		switch {
		case strings.HasPrefix(k.resource, "events"):
			t.events += n
		case strings.HasPrefix(k.resource, "leases"):
			t.leases += n
		default:
			t.state += n
		}
		if k.code == http.StatusConflict {
			t.conflicts += n
		}
	}
	return t
}

// report prints one component's counts per VM, sorted.
func report(logf func(string, ...any), who string, counts map[writeKey]int, vms int) {
	keys := make([]writeKey, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j])
	})
	for _, k := range keys {
		logf("  %-14s %-6s %-45s %3d  %4d  (%.2f per VM)", who, k.verb, k.resource, k.code, counts[k], float64(counts[k])/float64(vms))
	}
}

// runningLaunchers are launcher doubles for the node agent in the writes benchmark: each guest runs
// from the first sync on, with one interface and an address, as a real guest reports it.
type runningLaunchers struct {
	mu     sync.Mutex
	synced map[string]bool // by launcher Pod UID
}

func (l *runningLaunchers) dial(pod *corev1.Pod) nodeagent.Launcher {
	return &runningLauncher{all: l, uid: string(pod.UID)}
}

type runningLauncher struct {
	all *runningLaunchers
	uid string
}

var _ nodeagent.Launcher = (*runningLauncher)(nil)

func (l *runningLauncher) SocketPath() string { return "/nonexistent/" + l.uid + "/launcher.sock" }

func (l *runningLauncher) Status(context.Context) (launcherv1.Status, error) {
	l.all.mu.Lock()
	defer l.all.mu.Unlock()
	if !l.all.synced[l.uid] {
		return launcherv1.Status{State: launcherv1.DomainNone}, nil
	}
	return launcherv1.Status{State: launcherv1.DomainRunning, Reason: launcherv1.ReasonStarted, Emulation: true,
		Interfaces: []launcherv1.Interface{{Name: "default", MAC: "52:54:00:00:00:01", IPs: []string{"10.0.2.2"}}}}, nil
}

func (l *runningLauncher) Sync(ctx context.Context, _ launcherv1.SyncRequest) (launcherv1.Status, error) {
	l.all.mu.Lock()
	l.all.synced[l.uid] = true
	l.all.mu.Unlock()
	return l.Status(ctx)
}

func (l *runningLauncher) Shutdown(context.Context, int64) error { return nil }

func (l *runningLauncher) Pause(ctx context.Context) (launcherv1.Status, error) { return l.Status(ctx) }

func (l *runningLauncher) Unpause(ctx context.Context) (launcherv1.Status, error) {
	return l.Status(ctx)
}

func (l *runningLauncher) ExitStatus() (*launcherv1.Status, error) { return nil, nil }

func (l *runningLauncher) SerialConsole(context.Context) (net.Conn, error) {
	return nil, errors.New("the benchmark's launchers have no console")
}

func (l *runningLauncher) VNC(context.Context) (net.Conn, error) {
	return nil, errors.New("the benchmark's launchers have no display")
}

func (l *runningLauncher) Reboot(context.Context) error { return nil }
func (l *runningLauncher) Reset(context.Context) error  { return nil }

var errNoGuestAgent = errors.New("the benchmark's launchers have no guest agent")

func (l *runningLauncher) GuestAgentInfo(context.Context) (*virtv1.VirtualMachineInstanceGuestAgentInfo, error) {
	return nil, errNoGuestAgent
}
func (l *runningLauncher) Freeze(context.Context, launcherv1.FreezeRequest) error {
	return errNoGuestAgent
}
func (l *runningLauncher) Unfreeze(context.Context) error { return errNoGuestAgent }
func (l *runningLauncher) Exec(context.Context, *subv1.ExecRequest) (*subv1.ExecResult, error) {
	return nil, errNoGuestAgent
}

func (l *runningLauncher) PortForward(context.Context, int) (net.Conn, error) {
	return nil, errors.New("the benchmark's launchers have no guest network")
}

func (l *runningLauncher) PrepareTarget(context.Context, launcherv1.SyncRequest) (launcherv1.Status, error) {
	return launcherv1.Status{}, errors.New("the benchmark's launchers do not migrate")
}

func (l *runningLauncher) Migrate(context.Context, launcherv1.MigrateRequest) (launcherv1.Status, error) {
	return launcherv1.Status{}, errors.New("the benchmark's launchers do not migrate")
}

func (l *runningLauncher) CancelMigration(context.Context) error {
	return errors.New("the benchmark's launchers do not migrate")
}

func (l *runningLauncher) SetNodeCheck(context.Context, launcherv1.NodeCheck) error { return nil }

func (l *runningLauncher) PrivateDir() string { return "/nonexistent/" + l.uid }

func (l *runningLauncher) MigrationSocket(context.Context, string) (net.Conn, error) {
	return nil, errors.New("the benchmark's launchers do not migrate")
}
