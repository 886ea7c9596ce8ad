package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/boottime"
	"github.com/podvirt/podvirt/nodeagent/launcher/domainxml"
)

// errConflict marks a request that does not fit the guest's current state (HTTP 409).
var errConflict = errors.New("conflict")

// conflict marks err as errConflict without changing its message.
type conflict struct{ err error }

func (c conflict) Error() string   { return c.err.Error() }
func (c conflict) Unwrap() []error { return []error{errConflict, c.err} }

// errNotReady marks a sync that came before the disk containers wrote their files (HTTP 503): the
// node agent asks again.
var errNotReady = errors.New("not ready")

// errBadRequest marks a malformed request (HTTP 400).
var errBadRequest = errors.New("bad request")

type opKind int

const (
	opSync opKind = iota
	opShutdown
	opKill
	opPause
	opUnpause
	opReboot
	opReset
	opForward
	opPrepareTarget
	opMigrate
	opCancelMigration
	// opAgent lends a reference to the domain for a guest agent call (guestagent.go); opFreezeAgain,
	// opFreezeDone, opThawed and opThawFailed move the freeze state (freeze.go).
	opAgent
	opFreezeAgain
	opFreezeDone
	opThawed
	opThawFailed
)

// request is one command handed from an HTTP handler to the guest's loop.
type request struct {
	op      opKind
	sync    launcherv1.SyncRequest
	migrate launcherv1.MigrateRequest
	grace   time.Duration
	// port is the guest port of opForward; local receives the loopback port that reaches it.
	port  int
	local *int
	// agentDom receives opAgent's domain reference, lent for agentFor.
	agentDom **libvirt.Domain
	agentFor agentPurpose
	// outcome is opFreezeDone's (grace: the unfreeze timeout); freezeGen the freeze state a thaw's
	// answer is about (0: any).
	outcome   freezeOutcome
	freezeGen uint64
	reply     chan error
}

// guest owns the one domain of this launcher. All libvirt calls happen on its loop goroutine; HTTP
// handlers send requests and read the published status.
type guest struct {
	cfg  *Config
	hv   *hypervisor
	reqs chan request
	// done is closed when the loop has returned: requests after that fail at once.
	done chan struct{}

	mu     sync.Mutex
	status launcherv1.Status
	// agentInfo is what the guest agent last reported, at agentInfoAt (guestagent.go); agentFetch
	// admits one fetch at a time.
	agentInfo   *virtv1.VirtualMachineInstanceGuestAgentInfo
	agentInfoAt time.Time
	agentFetch  chan struct{}
	// guestNICs are the guest's NICs as the agent last reported them (name, MAC, addresses).
	guestNICs []launcherv1.Interface
	// agentReboot is set while a reboot through the guest agent runs (one at a time); agentCalls
	// joins the goroutines that call the agent for the loop (a reboot, a thaw, a fetch) when it ends.
	agentReboot atomic.Bool
	agentCalls  sync.WaitGroup
	// agentFetching is set while a fetch started by the agent's connecting runs.
	agentFetching atomic.Bool
	// credState is the outcome of the last propagation of accessCredentials (accesscredentials.go).
	credState atomic.Pointer[launcherv1.CredentialSync]
	// lastHeard is when the node agent last sent a request (boottime.Now: the wall clock may step,
	// and a suspended or frozen node's silence must count when it thaws).
	lastHeard atomic.Int64
	// kubelet tells whether the node's kubelet is alive while the agent is silent.
	kubelet *kubeletCheck
	// started: a guest was started here (or arrived by migration), so the agent's silence counts.
	started atomic.Bool

	// Owned by the loop.
	dom         *libvirt.Domain
	vmi         *virtv1.VirtualMachineInstance
	emulation   bool
	ifaces      []launcherv1.Interface
	memMessage  string
	shutdownReq bool
	killReq     bool
	forced      bool
	fenced      bool
	terminated  bool // SIGTERM while the guest ran, without a stop request (see ReasonTerminated)
	grace       *time.Timer
	// The freeze state (freeze.go): frozen on request; thaw fires at the unfreeze timeout.
	frozen    bool
	thaw      *time.Timer
	freezing  int
	freezeGen uint64
	thawTries int
	// agentUp: the guest agent was connected at the last refresh; agentAsked: when the loop last
	// started a background fetch of what it reports.
	agentUp    bool
	agentAsked time.Time
	// credSync: the goroutine propagating accessCredentials was started.
	credSync bool
	stopped  *lifecycle
	// watchdogOff: the guest's watchdog expired and its action is poweroff (qemu exits).
	watchdogOff bool
	// goneSince is when the domain was first found gone before its STOPPED event was read.
	goneSince time.Time
	// synced is closed by the first sync (warmUp stops waiting for it).
	synced     chan struct{}
	syncedOnce sync.Once
	// netdev is qemu's name of the first pod network NIC's backend ("" without one); forwards maps a guest
	// TCP port to the loopback port of the Pod that reaches it (see forward).
	netdev   string
	forwards map[int]int
	// A live migration (see migration.go): target is a migration target's libvirt daemon and
	// incoming the guest it waits for; migration is what Status.Migration reports; migrated
	// receives the outcome of the source's migration, which runs while migrating.
	target    *daemon
	incoming  *incoming
	migration *launcherv1.MigrationStatus
	migrated  chan sent
	migrating bool
}

func newGuest(cfg *Config, hv *hypervisor) *guest {
	g := &guest{cfg: cfg, hv: hv, reqs: make(chan request), done: make(chan struct{}), migrated: make(chan sent, 1), synced: make(chan struct{}),
		agentFetch: make(chan struct{}, 1)}
	g.kubelet = newKubeletCheck(cfg, g.agentSilent)
	return g
}

// agentSilent is how long the node agent has been silent.
func (g *guest) agentSilent() time.Duration {
	return boottime.Now() - time.Duration(g.lastHeard.Load())
}

// Status is the last published status.
func (g *guest) Status() launcherv1.Status {
	g.mu.Lock()
	st := g.status
	g.mu.Unlock()
	st.NodeCheck = g.kubelet.configured()
	return st
}

// do hands a request to the loop and waits for its outcome.
func (g *guest) do(ctx context.Context, r request) error {
	r.reply = make(chan error, 1)
	select {
	case g.reqs <- r:
	case <-g.done:
		return fmt.Errorf("%w: the guest has ended", errConflict)
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-r.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loop runs until the guest, once started, is gone, and returns its final status. ctx ending starts a
// graceful shutdown (or returns at once when no guest was ever started).
func (g *guest) loop(ctx context.Context) (launcherv1.Status, error) {
	defer g.agentCalls.Wait() // after close(g.done): their requests to the loop then fail at once
	defer close(g.done)
	defer func() {
		if g.migrating { // the domain is gone: its migration fails at once
			g.migrationEnded(<-g.migrated)
		}
	}()
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	done := ctx.Done()
	for {
		var graceC, thawC <-chan time.Time
		if g.grace != nil {
			graceC = g.grace.C
		}
		if g.thaw != nil {
			thawC = g.thaw.C
		}
		var arrivals <-chan lifecycle
		if g.incoming != nil {
			arrivals = g.target.hv.events
		}
		select {
		case <-done:
			done = nil
			if g.dom == nil {
				return launcherv1.Status{Message: "terminated before a guest was started"}, nil
			}
			g.terminated = !g.shutdownReq && !g.killReq
			g.cfg.Log.Info("Terminating: shutting the guest down", "gracePeriod", g.gracePeriod(), "requested", !g.terminated)
			if err := g.shutdown(g.gracePeriod()); err != nil {
				g.cfg.Log.Error("Shutdown on termination", "err", err)
			}
		case r := <-g.reqs:
			r.reply <- g.handle(ctx, r)
		case ev := <-g.hv.events:
			switch {
			case g.dom != nil && ev.watchdog != nil:
				g.watchdogOff = *ev.watchdog == libvirt.DOMAIN_EVENT_WATCHDOG_POWEROFF
			case g.dom != nil && ev.event == libvirt.DOMAIN_EVENT_STOPPED:
				g.stopped = &ev
			}
		case <-graceC:
			g.grace = nil
			g.cfg.Log.Info("Grace period expired: destroying the guest")
			g.forced = true
			if err := g.dom.Destroy(); err != nil {
				g.cfg.Log.Error("Destroy after the grace period", "err", err)
			}
		case <-thawC:
			g.cfg.Log.Info("Unfreeze timeout passed: thawing the guest's file systems")
			g.thawInBackground()
		case <-arrivals:
			g.adopt()
		case res := <-g.migrated:
			g.migrationEnded(res)
		case <-poll.C:
			g.fenceIfAlone()
			if g.incoming != nil {
				g.adopt()
			}
		}
		if g.dom == nil {
			continue
		}
		if final, gone := g.refresh(); gone {
			if g.migrating { // the guest left by migration: its outcome comes at once
				g.migrationEnded(<-g.migrated)
				final.State, final.Reason, final.Message = g.finalState()
				final.Migration = g.migrationStatus()
				g.publish(final)
			}
			return final, nil
		}
	}
}

// heard notes the node agent's own passes — status, sync and shutdown requests, at their start and
// their end, each no later than the vouch it was sent with — for fenceIfAlone (while a sync is
// served, which may take longer than the limit, the agent vouches with status requests). Requests
// a user sends through the agent (pause, port-forward, …) do not count: an agent cut off from the
// control plane still forwards them, but no longer asks for the status. Only the agent vouches: a request counts
// only from a peer running as root (SO_PEERCRED, peerContext); every process of the launcher Pod
// runs as launcherv1.LauncherUID and cannot keep a guest alive the agent no longer vouches for.
func (g *guest) heard(next http.Handler) http.Handler {
	g.lastHeard.Store(int64(boottime.Now()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vouches := fromAgent(r) &&
			(r.URL.Path == launcherv1.PathStatus || r.URL.Path == launcherv1.PathSync || r.URL.Path == launcherv1.PathShutdown)
		until := vouchedUntil(r)
		if vouches {
			g.hear(until)
		}
		next.ServeHTTP(w, r)
		if vouches && r.Context().Err() == nil { // the agent still waits for the answer (it gave up: no vouching)
			g.hear(until)
		}
	})
}

// hear notes the agent heard now, but no later than until (0: no bound), and never earlier than
// already noted. A guest whose fence fell due before this request — its loop busy with a sync, or
// a node that thawed and whose agent got its word in before the loop's next poll — stays due: a
// late request does not lift it (the kubelet check's overdue latch).
func (g *guest) hear(until time.Duration) {
	if g.started.Load() {
		g.kubelet.latchIfDue(g.agentSilent())
	}
	at := boottime.Now()
	if until > 0 && until < at {
		at = until
	}
	for {
		old := g.lastHeard.Load()
		if int64(at) <= old || g.lastHeard.CompareAndSwap(old, int64(at)) {
			return
		}
	}
}

// vouchedUntil is the request's launcherv1.HeaderVouchedUntil (0 when absent or malformed).
func vouchedUntil(r *http.Request) time.Duration {
	v, err := strconv.ParseInt(r.Header.Get(launcherv1.HeaderVouchedUntil), 10, 64)
	if err != nil || v <= 0 {
		return 0
	}
	return time.Duration(v)
}

// fromAgent reports whether the peer of r's connection runs as root: the node agent (see heard).
func fromAgent(r *http.Request) bool {
	uid, known := r.Context().Value(peerUIDKey{}).(uint32)
	return known && uid == 0
}

// fenceIfAlone destroys the guest once the node agent has been silent for FenceAfter and the node's
// kubelet has not been known alive for as long (launcherv1.Fence): a node cut off from the control
// plane is one the controllers will soon count as lost, and they start the VM elsewhere (see
// launcherv1.AgentSilenceLimit); an agent that is merely away, on a node whose kubelet still renews
// its lease, stops no guest.
func (g *guest) fenceIfAlone() {
	if g.dom == nil || g.fenced || g.cfg.FenceAfter <= 0 {
		return
	}
	now := boottime.Now()
	silent := g.agentSilent()
	if !g.kubelet.fenceDue(silent) {
		return
	}
	sinceKubelet, known := g.kubelet.aliveSince(now)
	kubelet := "never"
	if known {
		kubelet = sinceKubelet.Round(time.Second).String() + " ago"
	}
	g.cfg.Log.Warn("The node agent is silent and the node's kubelet is not known alive: destroying the guest so that it cannot run twice",
		"silentFor", silent.Round(time.Second).String(), "kubeletKnownAlive", kubelet)
	g.fenced = true
	if err := g.dom.Destroy(); err != nil {
		g.cfg.Log.Error("Destroy when fencing", "err", err)
	}
}

func (g *guest) handle(ctx context.Context, r request) error {
	switch r.op {
	case opSync:
		if g.target != nil {
			return fmt.Errorf("%w: %w", errConflict, errMigrationTarget)
		}
		return g.sync(ctx, r.sync)
	case opPrepareTarget:
		return g.prepareTarget(ctx, r.sync)
	}
	if g.dom == nil {
		return fmt.Errorf("%w: no guest was started yet (sync first)", errConflict)
	}
	var err error
	switch r.op {
	case opShutdown:
		g.terminated = false // asked for after all (the Pod's SIGTERM can come first)
		err = g.shutdown(r.grace)
	case opKill:
		g.terminated = false
		g.killReq = true
		err = g.dom.Destroy()
	case opPause:
		err = g.dom.Suspend()
	case opUnpause:
		err = g.dom.Resume()
	case opReboot:
		err = g.reboot()
	case opReset:
		err = g.reset()
	case opForward:
		*r.local, err = g.forward(r.port)
	case opMigrate:
		err = g.migrate(r.migrate)
	case opCancelMigration:
		err = g.cancelMigration()
	case opAgent:
		err = g.lendFor(r.agentFor, r.agentDom)
	case opFreezeAgain, opFreezeDone, opThawed, opThawFailed:
		err = g.freezeOp(r)
	}
	if err != nil {
		return conflict{err}
	}
	g.refresh()
	return nil
}

// gracePeriod is the VMI's terminationGracePeriodSeconds, else the API's default.
func (g *guest) gracePeriod() time.Duration {
	grace := virtv1.DefaultGracePeriodSeconds
	if g.vmi != nil {
		grace = g.vmi.Spec.GracePeriodSeconds()
	}
	return time.Duration(grace) * time.Second
}

// shutdown presses the ACPI power button and arms the grace timer (0: destroy at once). A second
// request keeps the earlier deadline unless the new one is sooner.
func (g *guest) shutdown(grace time.Duration) error {
	g.shutdownReq = true
	if grace <= 0 {
		g.forced = true
		return g.dom.Destroy()
	}
	if err := g.dom.ShutdownFlags(libvirt.DOMAIN_SHUTDOWN_ACPI_POWER_BTN); err != nil {
		return fmt.Errorf("acpi shutdown: %w", err)
	}
	if g.grace == nil {
		g.grace = time.NewTimer(grace)
	}
	return nil
}

// stoppedEventWait is how long a domain found gone waits for its STOPPED event before it ends
// without one (the run loop polls every second).
const stoppedEventWait = 2 * time.Second

// refresh publishes the domain's current state; gone reports the domain has ended, with its final status.
func (g *guest) refresh() (final launcherv1.Status, gone bool) {
	st := launcherv1.Status{Emulation: g.emulation, Interfaces: g.withGuestNICs(g.ifaces), QemuPID: g.qemuPID(), Migration: g.migrationStatus()}
	state, reason, err := g.dom.GetState()
	switch {
	case err == nil && state != libvirt.DOMAIN_SHUTOFF && state != libvirt.DOMAIN_CRASHED:
		g.goneSince = time.Time{}
		st.State = stateOf(state)
		st.Reason, st.Message = launcherv1.ReasonStarted, g.memMessage
		g.followAgent(agentConnected(g.dom))
		if g.agentUp {
			g.startCredentialSync()
		}
		st.AgentConnected, st.Frozen, st.GuestOSInfo = g.agentUp, g.frozen, g.guestOS()
		st.AccessCredentials = g.credState.Load()
		if st.State == launcherv1.DomainPaused && reason == int(libvirt.DOMAIN_PAUSED_SHUTTING_DOWN) && !g.shutdownReq {
			// An ACPI reboot: libvirt stops the powered-off guest for a moment, resets and resumes it.
			st.State = launcherv1.DomainRunning
		}
		if st.State == launcherv1.DomainPaused {
			st.Reason = launcherv1.ReasonPaused
			if reason == int(libvirt.DOMAIN_PAUSED_STARTING_UP) || reason == int(libvirt.DOMAIN_PAUSED_USER) && g.startPaused() {
				st.Reason = launcherv1.ReasonStartedPaused
			}
		}
		if g.shutdownReq && st.State == launcherv1.DomainRunning {
			st.State, st.Reason = launcherv1.DomainShuttingDown, launcherv1.ReasonShutdownRequested
			if g.terminated {
				st.Reason = launcherv1.ReasonTerminated
			}
		}
		g.publish(st)
		return st, false
	case g.stopped == nil && (g.goneSince.IsZero() || time.Since(g.goneSince) < stoppedEventWait):
		// The domain is gone but its STOPPED event (how it ended) has not been read yet: wait for
		// it a while, by time, not by passes (a burst of other events, a SIGTERM, must not use the
		// wait up: under load a guest that powered off was reported killed).
		if g.goneSince.IsZero() {
			g.goneSince = time.Now()
		}
		return st, false
	}
	st.QemuPID = 0
	st.State, st.Reason, st.Message = g.finalState()
	g.publish(st)
	g.cfg.Log.Info("Guest ended", "state", st.State, "reason", st.Reason, "message", st.Message)
	return st, true
}

func (g *guest) startPaused() bool {
	return g.vmi != nil && g.vmi.Spec.StartStrategy != nil && *g.vmi.Spec.StartStrategy == virtv1.StartStrategyPaused
}

// finalState says how the guest ended, from what was requested and libvirt's STOPPED detail.
func (g *guest) finalState() (launcherv1.DomainState, string, string) {
	detail := -1
	if g.stopped != nil {
		detail = g.stopped.detail
	}
	switch {
	case detail == int(libvirt.DOMAIN_EVENT_STOPPED_MIGRATED) || g.leftByMigration():
		return launcherv1.DomainMigrated, launcherv1.ReasonMigrated, "the guest moved to the migration target"
	case g.terminated && !g.fenced:
		how := "it powered off"
		if detail != int(libvirt.DOMAIN_EVENT_STOPPED_SHUTDOWN) {
			how = "it was stopped"
		}
		return launcherv1.DomainCrashed, launcherv1.ReasonTerminated,
			"the launcher was terminated while the guest ran, without a stop request: the kubelet stopped it (a failed liveness probe, " +
				"a node shutdown) or its Pod was deleted; the guest was shut down (" + how + ")"
	case g.watchdogOff: // whether qemu reports it as a shutdown or as its exit
		return launcherv1.DomainCrashed, launcherv1.ReasonWatchdog, "the guest's watchdog expired and powered it off"
	case detail == int(libvirt.DOMAIN_EVENT_STOPPED_SHUTDOWN):
		return launcherv1.DomainShutoff, launcherv1.ReasonGuestShutdown, "the guest powered off"
	case g.killReq:
		return launcherv1.DomainCrashed, launcherv1.ReasonKilled, "the guest was killed on request"
	case g.fenced:
		return launcherv1.DomainCrashed, launcherv1.ReasonFenced,
			fmt.Sprintf("the node agent was silent for more than %s and the node's kubelet was not known to renew its lease: the guest was stopped so that it cannot run twice", g.cfg.FenceAfter)
	case g.forced:
		return launcherv1.DomainShutoff, launcherv1.ReasonGracePeriodExpired,
			"the guest did not power off within the grace period and was stopped"
	case detail == int(libvirt.DOMAIN_EVENT_STOPPED_CRASHED):
		return launcherv1.DomainCrashed, launcherv1.ReasonGuestCrashed, "the guest crashed"
	case detail == int(libvirt.DOMAIN_EVENT_STOPPED_FAILED):
		return launcherv1.DomainCrashed, launcherv1.ReasonQemuCrashed, "qemu exited unexpectedly"
	default:
		return launcherv1.DomainCrashed, launcherv1.ReasonQemuKilled, "the guest stopped without a request"
	}
}

func (g *guest) publish(st launcherv1.Status) {
	g.mu.Lock()
	g.status = st
	g.mu.Unlock()
}

// qemuPID reads the pid file the embedded driver keeps for the domain.
func (g *guest) qemuPID() int {
	if g.vmi == nil {
		return 0
	}
	data, err := os.ReadFile(filepath.Join(g.hv.runDir, domainxml.DomainName(g.vmi)+".pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

// liveDomain is the domain's XML as libvirt runs it.
func liveDomain(dom *libvirt.Domain) (*libvirtxml.Domain, error) {
	x, err := dom.GetXMLDesc(0)
	if err != nil {
		return nil, fmt.Errorf("get domain xml: %w", err)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(x); err != nil {
		return nil, fmt.Errorf("parse domain xml: %w", err)
	}
	return &d, nil
}

// parseVMI decodes a SyncRequest's VMI and checks it is the one this launcher runs.
func (g *guest) parseVMI(req launcherv1.SyncRequest) (*virtv1.VirtualMachineInstance, error) {
	var vmi virtv1.VirtualMachineInstance
	if err := json.Unmarshal(req.VMI, &vmi); err != nil {
		return nil, fmt.Errorf("%w: vmi: %w", errBadRequest, err)
	}
	if vmi.Name != g.cfg.VMIName || vmi.Namespace != g.cfg.Namespace {
		return nil, fmt.Errorf("%w: vmi: this launcher runs %s/%s, not %s/%s", errBadRequest,
			g.cfg.Namespace, g.cfg.VMIName, vmi.Namespace, vmi.Name)
	}
	if errs := vmi.Spec.NameErrors(field.NewPath("spec")); len(errs) > 0 { // names become paths below
		return nil, fmt.Errorf("%w: %w", errBadRequest, errs.ToAggregate())
	}
	return &vmi, nil
}
