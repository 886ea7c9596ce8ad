package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/statuspatch"
	"github.com/podvirt/podvirt/nodeagent/accel"
	"github.com/podvirt/podvirt/nodeagent/launcherclient"
)

// ControllerName is the name the agent's Events and logs carry.
const ControllerName = "virt-handler"

// workers is how many instances are reconciled at once: a first sync can take seconds (the launcher
// prepares disks and starts qemu), and other guests must not wait behind it.
const workers = 8

// Bounds that keep a launcher that does not answer (a tenant can stop their launcher's process) from
// holding the workers that poll the other guests of the node, whose launchers fence them when not
// asked for launcherv1.AgentSilenceLimit.
const (
	// pollTimeout bounds a poll of a running launcher's status (it answers from memory).
	pollTimeout = 3 * time.Second
	// unresponsiveRetry is when a launcher that did not answer a poll is asked again: its own guest
	// is the only one at stake, and it is asked within launcherv1.AgentSilenceLimit.
	unresponsiveRetry = 15 * time.Second
	// slowCalls is how many syncs (up to launcherclient.SyncTimeout each) may run at once, leaving the
	// other workers to polls.
	slowCalls = workers / 2
)

// Launcher is what the agent needs of one launcher; launcherclient.Client implements it over the
// launcher's unix socket.
type Launcher interface {
	Status(ctx context.Context) (launcherv1.Status, error)
	Sync(ctx context.Context, req launcherv1.SyncRequest) (launcherv1.Status, error)
	Shutdown(ctx context.Context, gracePeriodSeconds int64) error
	Pause(ctx context.Context) (launcherv1.Status, error)
	Unpause(ctx context.Context) (launcherv1.Status, error)
	ExitStatus() (*launcherv1.Status, error)
	// SerialConsole connects to the guest's serial console.
	SerialConsole(ctx context.Context) (net.Conn, error)
	// VNC connects to the guest's VNC display.
	VNC(ctx context.Context) (net.Conn, error)
	// Reboot asks for an ACPI reboot.
	Reboot(ctx context.Context) error
	// Reset asks for a hard reset.
	Reset(ctx context.Context) error
	// PortForward connects to the guest's TCP port.
	PortForward(ctx context.Context, port int) (net.Conn, error)
	// GuestAgentInfo, Freeze, Unfreeze and Exec are calls to the guest agent.
	GuestAgentInfo(ctx context.Context) (*virtv1.VirtualMachineInstanceGuestAgentInfo, error)
	Freeze(ctx context.Context, req launcherv1.FreezeRequest) error
	Unfreeze(ctx context.Context) error
	Exec(ctx context.Context, req *subv1.ExecRequest) (*subv1.ExecResult, error)
	// SocketPath is the launcher's command socket (the agent watches for it while the launcher starts).
	SocketPath() string
	// PrepareTarget makes the launcher a migration target; Migrate sends its guest to one.
	PrepareTarget(ctx context.Context, req launcherv1.SyncRequest) (launcherv1.Status, error)
	Migrate(ctx context.Context, req launcherv1.MigrateRequest) (launcherv1.Status, error)
	CancelMigration(ctx context.Context) error
	// SetNodeCheck tells a launcher synced without one where to ask for its kubelet's lease.
	SetNodeCheck(ctx context.Context, nc launcherv1.NodeCheck) error
	// PrivateDir is the launcher's private directory as seen from the node.
	PrivateDir() string
	// MigrationSocket connects to a migration socket of the launcher.
	MigrationSocket(ctx context.Context, name string) (net.Conn, error)
}

var _ Launcher = (*launcherclient.Client)(nil)

// LauncherDialer returns the launcher of a launcher Pod on this node.
type LauncherDialer func(pod *corev1.Pod) Launcher

// KubeletDialer reaches launchers through the kubelet's emptyDir directory under kubeletRoot.
func KubeletDialer(kubeletRoot string) LauncherDialer {
	return func(pod *corev1.Pod) Launcher {
		return launcherclient.New(launcherv1.HostPrivateDir(kubeletRoot, string(pod.UID)))
	}
}

// Reconciler drives the instances scheduled on one node.
type Reconciler struct {
	// Client reads from the manager's cache (this node's instances and launcher Pods) and writes.
	Client   client.Client
	Recorder events.EventRecorder
	// NodeName is this node.
	NodeName string
	// Dial reaches an instance's launcher.
	Dial LauncherDialer
	// Accel is how guests run on this node (KVM or emulation).
	Accel accel.Decision
	// PollInterval is how often the agent asks a running launcher for its guest's state.
	PollInterval time.Duration
	// Triggers carries instances to look at now (after a pause or unpause request).
	Triggers <-chan event.GenericEvent
	// Clock tells the time; the real clock when nil.
	Clock clock.PassiveClock
	// HostDisks keeps the node's hostDisk images.
	HostDisks *HostDisks
	// QemuCapabilities go with the syncs of emulated guests; nil: none.
	QemuCapabilities *QemuCapabilities
	// Migrations serves the migration sockets of guests leaving this node; nil refuses to send any.
	Migrations *Migrations
	// Vouch reports whether the agent may talk to launchers (its heartbeat is fresh, see
	// heartbeat.VouchLimit), and the boot time until which it vouches, sent with every request to a
	// launcher (launcherv1.HeaderVouchedUntil; 0: no end known, none sent); always, unbounded, when
	// nil.
	Vouch func() (bool, time.Duration)
	// NodeCheck goes with every sync: where a launcher asks for its node's kubelet lease while the
	// agent is away (launcherv1.NodeCheck); none when nil or it returns nil.
	NodeCheck func() *launcherv1.NodeCheck

	sockets *socketWatch
	slow    chan struct{} // slowCalls tokens
}

// SetupWithManager registers the controller for this node's instances and their launcher Pods.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	sockets, err := newSocketWatch()
	if err != nil {
		return fmt.Errorf("watch launcher sockets: %w", err)
	}
	if err := mgr.Add(sockets); err != nil {
		_ = sockets.watcher.Close()
		return fmt.Errorf("watch launcher sockets: %w", err)
	}
	r.sockets = sockets
	r.slow = make(chan struct{}, slowCalls)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("nodeagent-virtualmachineinstance").
		For(&virtv1.VirtualMachineInstance{}).
		Owns(&corev1.Pod{}).
		WatchesRawSource(source.Channel(sockets.events, &handler.EnqueueRequestForObject{}))
	// A failing pass is retried within the poll interval, never after a longer backoff: a launcher not
	// asked for its status for launcherv1.AgentSilenceLimit fences its guest.
	b = b.WithOptions(pollOptions(r.PollInterval))
	if r.Triggers != nil {
		b = b.WatchesRawSource(source.Channel(r.Triggers, &handler.EnqueueRequestForObject{}))
	}
	return b.Complete(r)
}

// pollOptions are the options of the agent's controllers that talk to launchers: a failing pass is
// retried within the poll interval, never after a longer backoff.
func pollOptions(interval time.Duration) controller.Options {
	return controller.Options{MaxConcurrentReconciles: workers,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, interval)}
}

// scope is what one pass fetched and observed.
type scope struct {
	vmi      *virtv1.VirtualMachineInstance
	pod      *corev1.Pod
	launcher Launcher
	obs      observation
	// soon asks for the next pass after disksRetry rather than the poll interval.
	soon bool
	// handedOver: the guest migrated away; the target's agent follows the instance from now on.
	handedOver bool
	// unresponsive: the launcher did not answer a poll within pollTimeout.
	unresponsive bool
}

// disksRetry is how soon the agent syncs again a launcher still waiting for its disks (each sync
// already waits a few seconds in the launcher, so this is a long poll, not a busy one).
const disksRetry = 100 * time.Millisecond

// Reconcile follows one instance's guest and writes what it observed, once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	vmi := &virtv1.VirtualMachineInstance{}
	if err := r.Client.Get(ctx, req.NamespacedName, vmi); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !r.owns(vmi) {
		return ctrl.Result{}, nil
	}
	ctx, vouching := withVouch(ctx, r.Vouch)
	if !vouching { // cut off from the control plane: stay silent, so that the launcher fences its guest
		return ctrl.Result{RequeueAfter: r.PollInterval}, nil
	}
	pod, err := launcherPodOf(ctx, r.Client, r.NodeName, vmi)
	if err != nil || pod == nil {
		// No launcher Pod here: the VMI controller fails the instance when its Pod is gone.
		return ctrl.Result{}, err
	}
	s := &scope{vmi: vmi, pod: pod}
	s.launcher = boundedLauncher{Launcher: r.Dial(pod), unresponsive: &s.unresponsive}
	s.obs = observation{pod: pod, accel: decideFor(r.Accel, pod), now: metav1.NewTime(r.Clock.Now())}
	orig := vmi.DeepCopy()
	defer func() {
		res, retErr = statuspatch.Result(res, retErr, r.writeStatus(ctx, orig, vmi))
	}()
	switch {
	case vmi.Status.Phase.IsFinal():
		err = r.observeExit(s)
	case vmi.DeletionTimestamp != nil:
		err = r.reconcileDelete(ctx, s)
	default:
		err = r.reconcileNormal(ctx, s)
	}
	if s.handedOver {
		return ctrl.Result{}, err
	}
	if s.unresponsive {
		// Not an error: an error is retried at once, and the workers would wait on this launcher.
		ctrl.LoggerFrom(ctx).Info("The launcher did not answer in time; asking again later", "pod", pod.Name, "after", unresponsiveRetry, "error", fmt.Sprint(err))
		if orig.Status.Phase == virtv1.Scheduling {
			vmi.Status = *orig.Status.DeepCopy()
		} else {
			updateStatus(vmi, s.obs)
		}
		return ctrl.Result{RequeueAfter: unresponsiveRetry}, nil
	}
	if orig.Status.Phase == virtv1.Scheduling {
		// Started ahead of the Scheduled write, which the VMI controller makes once the kubelet
		// reports the Pod running: nothing is reported before it (no write races it).
		vmi.Status = *orig.Status.DeepCopy()
		if s.soon {
			return ctrl.Result{RequeueAfter: disksRetry}, err
		}
		return ctrl.Result{RequeueAfter: r.PollInterval}, err
	}
	updateStatus(vmi, s.obs)
	switch {
	case vmi.Status.Phase.IsFinal():
		return ctrl.Result{}, err
	case s.soon:
		return ctrl.Result{RequeueAfter: disksRetry}, err
	}
	return ctrl.Result{RequeueAfter: r.PollInterval}, err
}

// owns: the instance is on this node and in the agent's hands (Scheduled or Running; Scheduling to
// start its guest ahead, while the kubelet still starts the Pod's other containers), or final with
// the controller's generic reason that the launcher's exit file can make precise.
func (r *Reconciler) owns(vmi *virtv1.VirtualMachineInstance) bool {
	if vmi.Status.NodeName != r.NodeName || vmi.Status.LauncherPod == "" {
		return false
	}
	switch vmi.Status.Phase {
	case virtv1.Scheduling, virtv1.Scheduled, virtv1.Running:
		return true
	case virtv1.Succeeded, virtv1.Failed:
		return vmi.Status.Reason == virtv1.ReasonPodCompleted || vmi.Status.Reason == virtv1.ReasonPodFailed
	default:
		return false
	}
}

// toStart: the instance's guest is yet to be started here (Scheduling: bound to this node, the
// kubelet still starting the Pod; Scheduled: the Pod runs).
func toStart(vmi *virtv1.VirtualMachineInstance) bool {
	return vmi.Status.Phase == virtv1.Scheduling || vmi.Status.Phase == virtv1.Scheduled
}

// launcherPodOf is the instance's launcher Pod (status.launcherPod) if it runs on node, else nil.
func launcherPodOf(ctx context.Context, c client.Reader, node string, vmi *virtv1.VirtualMachineInstance) (*corev1.Pod, error) {
	if vmi.Status.LauncherPod == "" {
		return nil, nil
	}
	pod := &corev1.Pod{}
	err := c.Get(ctx, client.ObjectKey{Namespace: vmi.Namespace, Name: vmi.Status.LauncherPod}, pod)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get launcher pod: %w", err)
	case pod.Spec.NodeName != node || !metav1.IsControlledBy(pod, vmi):
		return nil, nil
	}
	return pod, nil
}

// reconcileNormal reads the guest's state and syncs the instance to a launcher that has no guest yet.
func (r *Reconciler) reconcileNormal(ctx context.Context, s *scope) error {
	st, err := s.launcher.Status(ctx)
	if err != nil && sending(s.vmi, r.NodeName) {
		// The source launcher exits as soon as its guest has moved: its exit file says so.
		if exit, _ := s.launcher.ExitStatus(); exit != nil && exit.State == launcherv1.DomainMigrated {
			st, err, s.unresponsive = *exit, nil, false
		}
	}
	if err != nil {
		return r.launcherDown(s, err)
	}
	if sending(s.vmi, r.NodeName) {
		if err := r.sendGuest(ctx, s, st); err != nil || s.handedOver {
			return err
		}
	} else if err := r.settleEnded(ctx, s, st); err != nil {
		return err
	}
	if st.State == launcherv1.DomainNone && toStart(s.vmi) {
		if err = r.HostDisks.Prepare(ctx, s.vmi, s.obs.pod); err == nil {
			err = prepareSecondaryNetworks(ctx, s.launcher.PrivateDir(), s.vmi, s.obs.pod)
		}
		if err == nil {
			if !r.acquireSlow() { // every slow-call slot is taken: ask again shortly
				s.soon = true
				return nil
			}
			st, err = func() (launcherv1.Status, error) {
				defer r.releaseSlow()
				return r.sync(ctx, s)
			}()
		}
		if err != nil {
			if disksPending(err) { // the launcher waited a few seconds: ask again shortly
				s.obs.disksPending, s.soon = true, true
				return nil
			}
			s.obs.syncErr = err
			r.Recorder.Eventf(s.vmi, s.pod, corev1.EventTypeWarning, EventSyncFailed, "Sync", "The launcher did not start the guest: %v", err)
			if permanentSyncError(err) {
				return nil // the instance fails: nothing to retry
			}
			return err
		}
	}
	if st.State != launcherv1.DomainNone { // synced before the agent knew virt-api's CA, or before it rotated
		if nc := r.nodeCheck(); nc != nil && nc.Digest() != st.NodeCheck {
			if err := s.launcher.SetNodeCheck(ctx, *nc); err != nil {
				ctrl.LoggerFrom(ctx).V(1).Info("The launcher did not take the node check", "err", err)
			}
		}
	}
	s.obs.live = &st
	return nil
}

// acquireSlow takes one of the slowCalls slots, if one is free.
func (r *Reconciler) acquireSlow() bool {
	select {
	case r.slow <- struct{}{}:
		return true
	default:
		return false
	}
}

func (r *Reconciler) releaseSlow() { <-r.slow }

// sync hands the instance to the launcher.
func (r *Reconciler) sync(ctx context.Context, s *scope) (launcherv1.Status, error) {
	req, err := syncRequest(s.vmi, s.obs.accel.Emulate)
	if err != nil {
		return launcherv1.Status{}, err
	}
	req.NodeCheck = r.nodeCheck()
	if s.obs.accel.Emulate {
		req.QemuCapabilities = r.QemuCapabilities.Files()
	}
	// The vouch Reconcile began with may be old by now: the sync counts no later than its own.
	ctx, vouching := withVouch(ctx, r.Vouch)
	if !vouching {
		return launcherv1.Status{}, errors.New("sync: the agent no longer vouches (cut off from the control plane)")
	}
	ctrl.LoggerFrom(ctx).Info("Syncing the instance to its launcher", "pod", s.pod.Name, "emulation", s.obs.accel.Emulate)
	stop := r.keepVouching(ctx, s.pod)
	defer stop()
	st, err := s.launcher.Sync(ctx, req)
	if err != nil {
		return st, fmt.Errorf("sync: %w", err)
	}
	return st, nil
}

// withVouch is ctx carrying the agent's vouch as it stands now (launcherclient.WithVouchedUntil), and
// whether the agent vouches; without a vouch function, ctx as it is and always.
func withVouch(ctx context.Context, vouch func() (bool, time.Duration)) (context.Context, bool) {
	if vouch == nil {
		return ctx, true
	}
	vouching, until := vouch()
	return launcherclient.WithVouchedUntil(ctx, until), vouching
}

// minPollInterval bounds how often keepVouching asks (a Reconciler built without a PollInterval).
const minPollInterval = 100 * time.Millisecond

// keepVouching asks pod's launcher for its status every poll interval while the agent vouches,
// each request with its own vouch, until stop is called (which returns once the asking is over).
// A sync may take longer than the launcher waits for its agent, and its end counts no later than
// the vouch it was sent with (launcherv1.HeaderVouchedUntil): these requests keep the launcher's
// guest while the agent is busy syncing and vouches, and only then.
func (r *Reconciler) keepVouching(ctx context.Context, pod *corev1.Pod) (stop func()) {
	if r.Vouch == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l := boundedLauncher{Launcher: r.Dial(pod), unresponsive: new(bool)}
		tick := time.NewTicker(max(r.PollInterval, minPollInterval))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if ctx, vouching := withVouch(ctx, r.Vouch); vouching {
				_, _ = l.Status(ctx) // what it says is the sync's to tell
			}
		}
	}()
	return func() { cancel(); <-done }
}

// nodeCheck is what goes into a sync's NodeCheck.
func (r *Reconciler) nodeCheck() *launcherv1.NodeCheck {
	if r.NodeCheck == nil {
		return nil
	}
	return r.NodeCheck()
}

// syncRequest is the instance as a launcher takes it (a sync, or a migration target's preparation).
func syncRequest(vmi *virtv1.VirtualMachineInstance, emulate bool) (launcherv1.SyncRequest, error) {
	payload := vmi.DeepCopy()
	payload.APIVersion, payload.Kind = virtv1.SchemeGroupVersion.String(), "VirtualMachineInstance"
	raw, err := json.Marshal(payload)
	if err != nil {
		return launcherv1.SyncRequest{}, fmt.Errorf("encode instance: %w", err)
	}
	return launcherv1.SyncRequest{VMI: raw, Emulation: emulate}, nil
}

// reconcileDelete asks a running guest for an ACPI shutdown within the instance's grace period; the
// launcher kills it when the period ends. The VMI controller deletes the Pod meanwhile, with a
// longer grace period, so the guest's own shutdown is what ends it.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) error {
	st, err := s.launcher.Status(ctx)
	if err != nil {
		return r.launcherDown(s, err)
	}
	// A guest already shutting down for its Pod's SIGTERM (the Pod was deleted with the instance,
	// and the kubelet was first) is asked too: the stop was requested.
	unasked := st.State == launcherv1.DomainShuttingDown && st.Reason == launcherv1.ReasonTerminated
	if st.State == launcherv1.DomainRunning || st.State == launcherv1.DomainPaused || unasked {
		grace := s.vmi.Spec.GracePeriodSeconds()
		if err := s.launcher.Shutdown(ctx, grace); err != nil {
			return fmt.Errorf("shut the guest down: %w", err)
		}
		r.Recorder.Eventf(s.vmi, s.pod, corev1.EventTypeNormal, EventShuttingDown, "Shutdown",
			"The instance is being deleted: ACPI shutdown sent, the guest is stopped after %ds", grace)
		if st, err = s.launcher.Status(ctx); err != nil {
			return r.launcherDown(s, err)
		}
	}
	s.obs.live = &st
	return nil
}

// observeExit reads the launcher's exit file of an instance that already ended.
func (r *Reconciler) observeExit(s *scope) error {
	exit, err := s.launcher.ExitStatus()
	s.obs.exit = exit
	return err
}

// launcherDown handles a launcher that did not answer: gone (its exit file tells how the guest
// ended), not yet up (look again as soon as its socket appears, or at the next poll), or failing.
func (r *Reconciler) launcherDown(s *scope, err error) error {
	if !errors.Is(err, launcherclient.ErrUnreachable) {
		return fmt.Errorf("launcher status: %w", err)
	}
	if toStart(s.vmi) && r.sockets != nil {
		r.sockets.Await(s.launcher.SocketPath(), s.vmi)
	}
	return r.observeExit(s)
}

// writeStatus writes the status if it changed (the VMI controller writes the same object: see
// statuspatch) and records the Events the change deserves.
func (r *Reconciler) writeStatus(ctx context.Context, orig, vmi *virtv1.VirtualMachineInstance) error {
	wrote, err := statuspatch.Write(ctx, r.Client, orig, vmi, "instance")
	if err != nil || !wrote {
		return err
	}
	for _, e := range statusEvents(&orig.Status, &vmi.Status) {
		r.Recorder.Eventf(vmi, nil, e.Type, e.Reason, e.Action, "%s", e.Note)
	}
	return nil
}
