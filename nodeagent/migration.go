package nodeagent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/clusterconfig"
	"github.com/podvirt/podvirt/internal/splice"
	"github.com/podvirt/podvirt/internal/statuspatch"
	"github.com/podvirt/podvirt/nodeagent/accel"
	"github.com/podvirt/podvirt/nodeagent/launcherclient"
	"github.com/podvirt/podvirt/nodeagent/migrationproxy"
)

// Live migration, the node agents' part (controllers/migration creates the target Pod):
//
//   - the target node's agent (MigrationTargetReconciler) has the target Pod's launcher prepare for
//     the guest, then records in status.migrationState where it is reachable (targetNodeAddress);
//   - the source node's agent (Reconciler.sendGuest) then serves the migration sockets in the
//     source Pod (migrationproxy), each connection carried to the target's agent over mutual TLS
//     (agentv1.PathMigrationStream), which joins it to the same socket in the target Pod; it asks the
//     source launcher to migrate and records startTimestamp;
//   - once the guest runs on the target, the source's agent hands the instance over: completed,
//     status.nodeName and launcherPod switched to the target, whose agent follows it from then on.
//     A failure is recorded as failed, with the reason; the guest runs on at the source.

// sending reports whether the instance is migrating away from node and not finished yet.
func sending(vmi *virtv1.VirtualMachineInstance, node string) bool {
	ms := vmi.Status.MigrationState
	return ms != nil && ms.SourceNode == node && vmi.Status.NodeName == node && !ms.Completed && !ms.Failed
}

// sendGuest advances the instance's migration away from this node: it starts the transfer once
// the target is ready, and records its end (the hand-over, or the failure).
func (r *Reconciler) sendGuest(ctx context.Context, s *scope, st launcherv1.Status) error {
	ms := s.vmi.Status.MigrationState
	m := st.Migration
	if m == nil || m.Role != launcherv1.MigrationSource || m.UID != ms.MigrationUID {
		m = nil // the launcher has not started this migration
	}
	switch {
	case m != nil && ms.StartTimestamp == nil: // started by a pass whose status write was lost
		start := metav1.NewTime(m.StartTime)
		if m.StartTime.IsZero() { // a time the launcher could not give (Bounded drops an impossible one)
			start = metav1.NewTime(r.Clock.Now())
		}
		ms.StartTimestamp = &start
	case m == nil && ms.StartTimestamp != nil && st.State != launcherv1.DomainRunning:
		r.migrationFailed(s, "the source launcher no longer runs the guest")
		return nil
	}
	switch {
	case m != nil && m.Phase == launcherv1.MigrationCompleted:
		r.handOver(s, m)
	case m != nil && m.Phase == launcherv1.MigrationFailed:
		if ms.AbortRequested {
			ms.AbortStatus = virtv1.MigrationAbortSucceeded
			r.migrationFailed(s, "the migration was aborted")
			return nil
		}
		r.migrationFailed(s, "the migration failed: "+m.Message)
	case ms.AbortRequested:
		if m == nil {
			ms.AbortStatus = virtv1.MigrationAbortSucceeded
			r.migrationFailed(s, "the migration was aborted before it started")
			return nil
		}
		if err := s.launcher.CancelMigration(ctx); err != nil {
			return fmt.Errorf("abort the migration: %w", err)
		}
	case m == nil && ms.TargetNodeAddress != "":
		return r.startSending(ctx, s)
	}
	return nil
}

// settleEnded cancels a transfer the launcher still runs for a migration already recorded as
// ended (its failure was written before this agent's start was), and stops its proxy.
func (r *Reconciler) settleEnded(ctx context.Context, s *scope, st launcherv1.Status) error {
	ms := s.vmi.Status.MigrationState
	if ms == nil || ms.SourceNode != r.NodeName || !(ms.Completed || ms.Failed) {
		return nil
	}
	r.Migrations.stop(ms.MigrationUID)
	if m := st.Migration; ms.Failed && m != nil && m.UID == ms.MigrationUID && m.Phase == launcherv1.MigrationRunning {
		if err := s.launcher.CancelMigration(ctx); err != nil {
			return fmt.Errorf("abort a migration recorded as failed: %w", err)
		}
	}
	return nil
}

// migrateRequest asks the launcher for the migration with the settings virt-controller fixed
// when it began (the cluster's bandwidthPerMigration and completionTimeoutPerGiB), within the
// launcher's bounds.
func migrateRequest(ms *virtv1.VirtualMachineInstanceMigrationState) launcherv1.MigrateRequest {
	req := launcherv1.MigrateRequest{UID: ms.MigrationUID}
	mc := ms.MigrationConfiguration
	if mc == nil {
		return req
	}
	if b := mc.BandwidthPerMigration; b != nil && b.Sign() > 0 {
		const mib = 1 << 20
		bytes := clusterconfig.MaxBandwidthPerMigration.Value()
		if b.Cmp(clusterconfig.MaxBandwidthPerMigration) < 0 {
			bytes = b.Value() // within int64
		}
		req.BandwidthMiBps = uint64(bytes / mib)
		if bytes%mib != 0 {
			req.BandwidthMiBps++ // libvirt counts MiB/s: a cap below one MiB/s is one MiB/s
		}
	}
	if t := mc.CompletionTimeoutPerGiB; t != nil && *t > 0 {
		req.CompletionTimeoutPerGiBSeconds = min(*t, launcherv1.MaxMigrationTimeoutSeconds)
	}
	return req
}

// startSending serves the source Pod's migration sockets and asks its launcher to migrate (asking
// again for the same migration is harmless: the launcher answers its status).
func (r *Reconciler) startSending(ctx context.Context, s *scope) error {
	ms := s.vmi.Status.MigrationState
	if r.Migrations == nil {
		r.migrationFailed(s, "this node agent does not send migrations")
		return nil
	}
	dial := r.Migrations.dialer(ms.TargetNode, ms.TargetNodeAddress, s.vmi.Namespace, ms.TargetPod)
	if err := r.Migrations.start(ms.MigrationUID, s.launcher.PrivateDir(), dial); err != nil {
		r.migrationFailed(s, fmt.Sprintf("cannot serve the migration sockets in the source Pod: %v", err))
		return nil
	}
	st, err := s.launcher.Migrate(ctx, migrateRequest(ms))
	if err != nil {
		r.migrationFailed(s, fmt.Sprintf("the source launcher did not start the migration: %v", err))
		return nil
	}
	start := metav1.NewTime(r.Clock.Now())
	if st.Migration != nil && !st.Migration.StartTime.IsZero() {
		start = metav1.NewTime(st.Migration.StartTime)
	}
	ms.StartTimestamp = &start
	r.Recorder.Eventf(s.vmi, s.pod, corev1.EventTypeNormal, agentv1.EventMigrationStarted, "Migrate",
		"Migrating the guest from %s to %s (pod %s)", ms.SourceNode, ms.TargetNode, ms.TargetPod)
	return nil
}

// handOver records the completed migration: the instance now runs in the target Pod, whose node's
// agent follows it from the next pass on.
func (r *Reconciler) handOver(s *scope, m *launcherv1.MigrationStatus) {
	ms := s.vmi.Status.MigrationState
	now := metav1.NewTime(r.Clock.Now())
	ms.Completed, ms.EndTimestamp = true, &now
	s.vmi.Status.NodeName, s.vmi.Status.LauncherPod = ms.TargetNode, ms.TargetPod
	if s.vmi.Status.EvacuationNodeName == ms.SourceNode {
		s.vmi.Status.EvacuationNodeName = "" // evacuated
	}
	s.handedOver = true
	r.Migrations.stop(ms.MigrationUID)
	figures := ""
	if m != nil && m.EndTime != nil {
		figures = fmt.Sprintf(" in %s (%.1f MB sent, %d ms downtime)", m.EndTime.Sub(m.StartTime).Round(time.Millisecond), float64(m.Bytes)/1e6, m.DowntimeMillis)
	}
	r.Recorder.Eventf(s.vmi, s.pod, corev1.EventTypeNormal, agentv1.EventMigrated, "Migrate",
		"The guest moved from %s to %s%s", ms.SourceNode, ms.TargetNode, figures)
}

// migrationFailed records the failure; the guest runs on here.
func (r *Reconciler) migrationFailed(s *scope, why string) {
	ms := s.vmi.Status.MigrationState
	now := metav1.NewTime(r.Clock.Now())
	ms.Failed, ms.FailureReason, ms.EndTimestamp = true, why, &now
	r.Migrations.stop(ms.MigrationUID)
	r.Recorder.Eventf(s.vmi, s.pod, corev1.EventTypeWarning, agentv1.EventMigrationFailed, "Migrate", "%s; the guest runs on %s", why, ms.SourceNode)
}

// Migrations serves the migration sockets of the source Pods on this node, one proxy per running
// migration, each connection carried to the target node's agent over mutual TLS.
type Migrations struct {
	// PeerTLS is the client side of the agents' mutual TLS towards the agent of a node
	// (AgentTLS.PeerConfig); plain TCP when nil.
	PeerTLS func(node string) (*tls.Config, error)
	Log     *slog.Logger

	mu      sync.Mutex
	proxies map[string]*migrationproxy.Proxy
}

// NeedLeaderElection is false: every node agent serves its own node.
func (g *Migrations) NeedLeaderElection() bool { return false }

// Start stops every proxy when ctx ends.
func (g *Migrations) Start(ctx context.Context) error {
	<-ctx.Done()
	g.mu.Lock()
	defer g.mu.Unlock()
	for uid, p := range g.proxies {
		p.Close()
		delete(g.proxies, uid)
	}
	return nil
}

func (g *Migrations) start(uid, dir string, dial migrationproxy.Dialer) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.proxies[uid] != nil {
		return nil
	}
	p, err := migrationproxy.Start(dir, dial, g.Log)
	if err != nil {
		return err
	}
	if g.proxies == nil {
		g.proxies = map[string]*migrationproxy.Proxy{}
	}
	g.proxies[uid] = p
	return nil
}

func (g *Migrations) stop(uid string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	p := g.proxies[uid]
	delete(g.proxies, uid)
	g.mu.Unlock()
	if p != nil {
		p.Close() // outside the lock: it waits for the proxied connections
	}
}

// dialer connects to socket name of the target Pod through the agent at addr, which must be node's.
func (g *Migrations) dialer(node, addr, namespace, pod string) migrationproxy.Dialer {
	return func(ctx context.Context, name string) (net.Conn, error) {
		var d interface {
			DialContext(ctx context.Context, network, addr string) (net.Conn, error)
		} = &net.Dialer{}
		if g.PeerTLS != nil {
			cfg, err := g.PeerTLS(node)
			if err != nil {
				return nil, err
			}
			d = &tls.Dialer{Config: cfg}
		}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("connect to the target's node agent at %s: %w", addr, err)
		}
		up, err := launcherclient.Upgrade(ctx, conn, addr, agentv1.MigrationStreamPath(namespace, pod, name))
		if err != nil {
			_ = conn.Close()
			return nil, err
		}
		return up, nil
	}
}

// migrationStream serves agentv1.PathMigrationStream.
func (s *SubresourceServer) migrationStream(w http.ResponseWriter, r *http.Request) {
	ns, podName, socket := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("socket")
	if _, agent := agentv1.NodeOf(agentv1.Caller(r.TLS)); !agent && s.TLSConfig != nil {
		writeError(w, http.StatusForbidden, fmt.Sprintf("only node agents send migrations, not %q", agentv1.Caller(r.TLS)))
		return
	}
	if !slices.Contains(migrationproxy.Names, socket) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("socket %q: not a migration socket", socket))
		return
	}
	pod := &corev1.Pod{}
	err := s.Reader.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: podName}, pod)
	if apierrors.IsNotFound(err) || err == nil && (pod.Spec.NodeName != s.NodeName || pod.Labels[launcherv1.MigrationJobLabel] == "" || s.APIReader == nil) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no migration target pod %s/%s on node %s", ns, podName, s.NodeName))
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	vmi, err := receiving(r.Context(), s.APIReader, pod)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if vmi == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no migration to pod %s/%s is under way", ns, podName))
		return
	}
	if source := vmi.Status.MigrationState.SourceNode; !s.callerIs(r, agentv1.NodeIdentity(source)) {
		writeError(w, http.StatusForbidden, fmt.Sprintf("the migration to pod %s/%s comes from node %s, not from %q", ns, podName, source, agentv1.Caller(r.TLS)))
		return
	}
	target, err := s.Dial(pod).MigrationSocket(r.Context(), socket)
	if err != nil {
		writeError(w, http.StatusBadGateway, fmt.Sprintf("connect to %s of pod %s: %v", socket, podName, err))
		return
	}
	if err := splice.Upgrade(context.WithoutCancel(r.Context()), w, launcherv1.UpgradeTCP, target, splice.ClientHalfCloses); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

// receiving returns the instance whose migration, not ended, has pod as its target, or nil. The
// instance is read uncached: this agent caches only the instances that run on its node.
func receiving(ctx context.Context, reader client.Reader, pod *corev1.Pod) (*virtv1.VirtualMachineInstance, error) {
	owner := metav1.GetControllerOf(pod)
	if owner == nil {
		return nil, nil
	}
	vmi := &virtv1.VirtualMachineInstance{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: owner.Name}, vmi); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	ms := vmi.Status.MigrationState
	if vmi.UID != owner.UID || ms == nil || ms.TargetPod != pod.Name || ms.MigrationUID != pod.Labels[launcherv1.MigrationJobLabel] || ms.Completed || ms.Failed {
		return nil, nil // handed over (the instance's own pass follows it now) or given up
	}
	return vmi, nil
}

// targetReadTimeout bounds the target's live read of its instance, so that its launcher is asked
// again within the poll interval and this bound while the apiserver does not answer.
const targetReadTimeout = 5 * time.Second

// MigrationTargetReconciler prepares the migration target Pods on this node (launcherv1.
// MigrationJobLabel) to receive their guests, and says in status.migrationState when they are.
type MigrationTargetReconciler struct {
	// Client reads this node's launcher Pods from the cache and writes.
	Client client.Client
	// APIReader reads the instance, which the cache holds only once it runs on this node.
	APIReader client.Reader
	Recorder  events.EventRecorder
	NodeName  string
	// Address is where the source's agent reaches this one (host:port of the subresource server).
	Address      string
	Dial         LauncherDialer
	Accel        accel.Decision
	PollInterval time.Duration
	Clock        clock.PassiveClock
	// NodeCheck goes with the target's preparation (Reconciler.NodeCheck).
	NodeCheck func() *launcherv1.NodeCheck
	// Vouch is Reconciler.Vouch: a target launcher, whose guest may have arrived, is asked only
	// while the agent vouches for it, and each request says until when.
	Vouch func() (vouching bool, until time.Duration)
}

// SetupWithManager registers the reconciler for this node's migration target Pods.
func (r *MigrationTargetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	isTarget := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[launcherv1.MigrationJobLabel] != "" })
	// Retried within the poll interval, never later: the arrived guest's launcher fences it when
	// not asked for its status for launcherv1.AgentSilenceLimit.
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodeagent-migrationtarget").
		For(&corev1.Pod{}, builder.WithPredicates(isTarget)).
		WithOptions(pollOptions(r.PollInterval)).
		Complete(r)
}

// Reconcile prepares one target Pod's launcher and reports the target ready, then polls it (so
// that it does not fence the guest once arrived) until the source's agent hands the instance over.
func (r *MigrationTargetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	if err := r.Client.Get(ctx, req.NamespacedName, pod); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	ctx, vouching := withVouch(ctx, r.Vouch)
	if !vouching { // cut off: stay silent, so that an arrived guest fences as every other one does
		return ctrl.Result{RequeueAfter: r.PollInterval}, nil
	}
	// The launcher is asked before the instance is read: the read goes to the apiserver (the cache
	// holds an instance only once it runs here), and a guest that arrived before the hand-over must
	// stay heard through a control-plane outage as every other guest does.
	launcher := r.Dial(pod)
	st, stErr := boundedLauncher{Launcher: launcher, unresponsive: new(bool)}.Status(ctx) // within pollTimeout
	readCtx, cancel := context.WithTimeout(ctx, targetReadTimeout)
	vmi, err := receiving(readCtx, r.APIReader, pod)
	cancel()
	if err != nil || vmi == nil {
		return ctrl.Result{}, err // retried within the poll interval
	}
	if errors.Is(stErr, launcherclient.ErrUnreachable) {
		return ctrl.Result{RequeueAfter: disksRetry}, nil // the launcher is starting
	}
	if stErr != nil {
		return ctrl.Result{}, fmt.Errorf("target launcher status: %w", stErr)
	}
	ms := vmi.Status.MigrationState
	orig := vmi.DeepCopy()
	if st.Migration == nil {
		if st, err = r.prepare(ctx, vmi, pod, launcher); err != nil {
			if disksPending(err) {
				return ctrl.Result{RequeueAfter: disksRetry}, nil
			}
			return ctrl.Result{}, err
		}
	}
	ms.TargetNodeAddress = r.Address
	if st.State == launcherv1.DomainRunning && !ms.TargetNodeDomainDetected {
		now := metav1.NewTime(r.Clock.Now())
		ms.TargetNodeDomainDetected, ms.TargetNodeDomainReadyTimestamp = true, &now
	}
	_, err = statuspatch.Write(ctx, r.Client, orig, vmi, "instance")
	return statuspatch.Result(ctrl.Result{RequeueAfter: r.PollInterval}, nil, err)
}

// prepare hands the instance to the target launcher, which prepares its files and waits for the guest.
func (r *MigrationTargetReconciler) prepare(ctx context.Context, vmi *virtv1.VirtualMachineInstance, pod *corev1.Pod, l Launcher) (launcherv1.Status, error) {
	req, err := syncRequest(vmi, decideFor(r.Accel, pod).Emulate)
	if err != nil {
		return launcherv1.Status{}, err
	}
	if r.NodeCheck != nil {
		req.NodeCheck = r.NodeCheck()
	}
	st, err := l.PrepareTarget(ctx, req)
	if err != nil && !disksPending(err) {
		r.Recorder.Eventf(vmi, pod, corev1.EventTypeWarning, EventSyncFailed, "Migrate", "The migration target did not get ready: %v", err)
		return st, fmt.Errorf("prepare the migration target: %w", err)
	}
	return st, err
}
