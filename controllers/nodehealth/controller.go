// Package nodehealth fails the instances on a node whose node agent stopped heart-beating: when this
// controller has not seen the agent's Lease (api/heartbeat/v1) renewed for a threshold, by its own
// clock and only counting time it was in contact with the control plane, every instance on that
// node that is not final goes Failed with reason NodeUnresponsive and its launcher Pod is deleted,
// so a VirtualMachine with runStrategy Always comes back elsewhere.
package nodehealth

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/statuspatch"
)

// ControllerName is the name Events and logs carry.
const ControllerName = "node-health-controller"

// NodeNameIndex indexes instances by status.nodeName.
const NodeNameIndex = "status.nodeName"

// Reconciler watches the node agents' heartbeat leases.
type Reconciler struct {
	Client client.Client
	// APIReader reads uncached: a lease is read again from the apiserver before its node's instances
	// fail, and Contact probes with it. Nil (unit tests): no re-read, contact always assumed.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Namespace holds the leases.
	Namespace string
	// Threshold is how old a heartbeat may get before the node counts as unresponsive.
	Threshold time.Duration
	// Clock tells the time; the real clock when nil.
	Clock clock.PassiveClock

	seen     sightings
	kubelets sightings // the kubelets' leases (corev1.NamespaceNodeLease), by node name
	contact  *Contact
}

// SetupWithManager registers the controller for the heartbeat leases in Namespace.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.APIReader != nil {
		r.contact = &Contact{Reader: r.APIReader, Namespace: r.Namespace, Clock: r.Clock}
		if err := mgr.Add(r.contact); err != nil {
			return fmt.Errorf("add the control-plane contact probe: %w", err)
		}
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &virtv1.VirtualMachineInstance{}, NodeNameIndex, func(o client.Object) []string {
		if n := o.(*virtv1.VirtualMachineInstance).Status.NodeName; n != "" {
			return []string{n}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index instances by node: %w", err)
	}
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == r.Namespace && strings.HasPrefix(o.GetName(), heartbeatv1.LeasePrefix)
	})
	kubelets := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == corev1.NamespaceNodeLease })
	// The kubelets' renewals only update sightings, on a queue of their own: they never delay the
	// agents' leases' (rule 4 counts on seeing a renewal within seconds).
	if err := ctrl.NewControllerManagedBy(mgr).Named("nodehealth-kubelets").
		For(&coordinationv1.Lease{}).WithEventFilter(kubelets).
		Complete(reconcile.Func(r.seeKubelet)); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodehealth").
		For(&coordinationv1.Lease{}).
		WithEventFilter(ours).
		Complete(r)
}

// seeKubelet records when a kubelet's lease was seen to change (forgotten a ConfirmHorizon after
// its deletion, as the agents' are).
func (r *Reconciler) seeKubelet(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	lease := &coordinationv1.Lease{}
	if err := r.Client.Get(ctx, req.NamespacedName, lease); err != nil {
		if apierrors.IsNotFound(err) {
			r.kubelets.forget(req.Name, r.Clock.Now())
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.kubelets.see(lease, r.Clock.Now())
	return ctrl.Result{}, nil
}

// Reconcile checks one heartbeat and fails the node's instances when it is stale.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	lease := &coordinationv1.Lease{}
	if err := r.Client.Get(ctx, req.NamespacedName, lease); err != nil {
		if apierrors.IsNotFound(err) { // kept while its agent may still confirm a peer's outage
			r.seen.forget(req.Name, r.Clock.Now())
			return ctrl.Result{}, r.markSchedulable(ctx, strings.TrimPrefix(req.Name, heartbeatv1.LeasePrefix), false)
		}
		return ctrl.Result{}, err
	}
	node := strings.TrimPrefix(lease.Name, heartbeatv1.LeasePrefix)
	stale, wait, err := r.stale(ctx, lease)
	if err != nil || !stale {
		if err == nil {
			err = r.markSchedulable(ctx, node, true)
		}
		return ctrl.Result{RequeueAfter: wait}, err
	}
	if err := r.markSchedulable(ctx, node, false); err != nil { // only outside tools read it: failover does not wait on it
		ctrl.LoggerFrom(ctx).Error(err, "label node unschedulable", "node", node)
	}
	if alive, wait, err := r.kubeletAlive(ctx, lease, node); err != nil || alive {
		return ctrl.Result{RequeueAfter: wait}, err
	}
	if blocked, wait, err := r.blocked(ctx, lease); err != nil || blocked {
		return ctrl.Result{RequeueAfter: wait}, err
	}
	now := r.Clock.Now()
	var vmis virtv1.VirtualMachineInstanceList
	if err := r.Client.List(ctx, &vmis, client.MatchingFields{NodeNameIndex: node}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list instances on node %s: %w", node, err)
	}
	var errs []error // one instance's error does not hold back the others
	for i := range vmis.Items {
		if err := r.failInstance(ctx, &vmis.Items[i], node, now); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return statuspatch.Result(ctrl.Result{}, nil, errors.Join(errs...))
	}
	return ctrl.Result{RequeueAfter: r.Threshold}, nil
}

// stale judges the lease by heartbeatv1.Stale: when this controller saw its renewal change, and since
// when it has been in contact with the control plane. Before calling it stale it reads the lease
// again, uncached: a renewal the cache has not delivered yet counts. Not stale: wait is when to look
// again.
func (r *Reconciler) stale(ctx context.Context, lease *coordinationv1.Lease) (bool, time.Duration, error) {
	now := r.Clock.Now()
	seen := r.seen.see(lease, now)
	var since time.Time
	if r.contact != nil {
		var ok bool
		if since, ok = r.contact.Since(); !ok { // cut off: nothing can be judged now
			return false, ProbeInterval, nil
		}
	}
	if !heartbeatv1.Stale(seen, since, now, r.Threshold) {
		return false, heartbeatv1.JudgedFrom(seen, since).Add(r.Threshold).Sub(now) + time.Second, nil
	}
	if r.APIReader == nil {
		return true, 0, nil
	}
	fresh := &coordinationv1.Lease{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(lease), fresh); err != nil {
		return false, 0, fmt.Errorf("read heartbeat %s: %w", lease.Name, err)
	}
	if heartbeatv1.Renewal(fresh) != heartbeatv1.Renewal(lease) { // seen now, after the read: never before it happened
		r.seen.see(fresh, r.Clock.Now())
		return false, r.Threshold, nil
	}
	r.seen.see(fresh, r.Clock.Now()) // its marks as they are now
	return true, 0, nil
}

// kubeletAlive applies rule 3 of docs/node-loss.md: a node whose agent's heartbeat is stale is not
// failed over while its kubelet's lease (read again uncached) has changed within the threshold, by
// this controller's sight and contact, as the agent's is judged: the agent is away, not the node, and
// its launchers keep their guests (launcherv1.Fence). A node whose kubelet lease is gone is judged
// by its last sighting (its kubelet may renew a new one, which its launchers see); never seen: not
// alive.
func (r *Reconciler) kubeletAlive(ctx context.Context, agentLease *coordinationv1.Lease, node string) (bool, time.Duration, error) {
	reader := client.Reader(r.Client)
	if r.APIReader != nil {
		reader = r.APIReader
	}
	lease := &coordinationv1.Lease{}
	err := reader.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: node}, lease)
	if err != nil && !apierrors.IsNotFound(err) {
		return false, 0, fmt.Errorf("read the kubelet lease of node %s: %w", node, err)
	}
	now := r.Clock.Now()
	var seen time.Time
	if err == nil {
		seen = r.kubelets.see(lease, now)
	} else if seen = r.kubelets.view(node).Changed; seen.IsZero() {
		return false, 0, nil
	}
	var since time.Time
	if r.contact != nil {
		since, _ = r.contact.Since() // in contact: stale() checked it
	}
	if heartbeatv1.Stale(seen, since, now, r.Threshold) {
		return false, 0, nil
	}
	r.Recorder.Eventf(agentLease, nil, corev1.EventTypeWarning, ReasonFailoverBlocked, "Wait",
		"The node agent's heartbeat is stale, but the kubelet of node %s still renews its lease: the agent is away, not the node, and its guests keep running", node)
	return true, heartbeatv1.JudgedFrom(seen, since).Add(r.Threshold).Sub(now) + time.Second, nil
}

// ReasonFailoverBlocked is the Event reason (on the stale lease) while a stale node's instances
// wait for heartbeatv1.FailoverBlocked.
const ReasonFailoverBlocked = "FailoverBlocked"

// blocked applies heartbeatv1.FailoverBlocked to node's stale lease, with the other agents' leases
// read again uncached (a renewal, a lapse's end or a mark the cache has not delivered yet counts,
// seen now).
func (r *Reconciler) blocked(ctx context.Context, lease *coordinationv1.Lease) (bool, time.Duration, error) {
	leases := &coordinationv1.LeaseList{}
	reader := client.Reader(r.Client)
	if r.APIReader != nil {
		reader = r.APIReader
	}
	if err := reader.List(ctx, leases, client.InNamespace(r.Namespace)); err != nil {
		return false, 0, fmt.Errorf("list heartbeats: %w", err)
	}
	now := r.Clock.Now()
	listed := map[string]bool{}
	for i := range leases.Items {
		if l := &leases.Items[i]; strings.HasPrefix(l.Name, heartbeatv1.LeasePrefix) {
			r.seen.see(l, now)
			listed[l.Name] = true
		}
	}
	others := r.seen.others(lease.Name, listed, now)
	blocked, why, wait := heartbeatv1.FailoverBlocked(r.seen.view(lease.Name), others, now)
	if blocked {
		r.Recorder.Eventf(lease, nil, corev1.EventTypeWarning, ReasonFailoverBlocked, "Wait", "The node agent's heartbeat is stale, but its instances are not failed over yet: %s", why)
	}
	return blocked, wait, nil
}

// failInstance marks one instance Failed (NodeUnresponsive), then removes its launcher Pod. Both
// steps are level based: a Pod whose deletion failed or was cut short is deleted again next time.
func (r *Reconciler) failInstance(ctx context.Context, vmi *virtv1.VirtualMachineInstance, node string, now time.Time) error {
	if !vmi.Status.Phase.IsFinal() {
		orig := vmi.DeepCopy()
		vmi.Status.SetPhase(virtv1.Failed, virtv1.ReasonNodeUnresponsive, metav1.NewTime(now))
		meta.SetStatusCondition(&vmi.Status.Conditions, metav1.Condition{
			Type: virtv1.VirtualMachineInstanceReady, Status: metav1.ConditionFalse, Reason: virtv1.ReasonNodeUnresponsive,
			Message: fmt.Sprintf("The node agent on %s stopped heart-beating more than %s ago", node, r.Threshold),
		})
		if wrote, err := statuspatch.Write(ctx, r.Client, orig, vmi, "instance "+vmi.Name); err != nil || !wrote {
			return err
		}
		r.Recorder.Eventf(vmi, nil, corev1.EventTypeWarning, virtv1.ReasonNodeUnresponsive, "Fail", "The node agent on %s is unresponsive; the instance is considered failed", node)
	}
	if vmi.Status.Phase != virtv1.Failed || vmi.Status.Reason != virtv1.ReasonNodeUnresponsive || vmi.Status.LauncherPod == "" {
		return nil
	}
	return r.removePod(ctx, vmi, node)
}

// removePod deletes the launcher Pod of an instance failed for its node, at once when the node
// itself is not Ready (no kubelet will ever confirm the Pod's end).
func (r *Reconciler) removePod(ctx context.Context, vmi *virtv1.VirtualMachineInstance, node string) error {
	pod := &corev1.Pod{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: vmi.Namespace, Name: vmi.Status.LauncherPod}, pod); err != nil {
		return client.IgnoreNotFound(err)
	}
	n := &corev1.Node{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: node}, n)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get node %s: %w", node, err)
	}
	noKubelet := apierrors.IsNotFound(err) || !nodeReady(n) // nobody will confirm a graceful end
	if pod.DeletionTimestamp != nil && (!noKubelet || ptr.Deref(pod.DeletionGracePeriodSeconds, 1) == 0) {
		return nil // being deleted as it should be
	}
	var opts []client.DeleteOption
	if noKubelet {
		opts = append(opts, client.GracePeriodSeconds(0))
	}
	if err := r.Client.Delete(ctx, pod, opts...); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete launcher pod of %s: %w", vmi.Name, err)
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// SchedulableLabel is KubeVirt's node label: "true" while the node's agent heart-beats, "false" once
// its heartbeat is stale or gone. KubeVirt's tools pick the nodes that can run guests by it.
const SchedulableLabel = "kubevirt.io/schedulable"

// markSchedulable sets the node's SchedulableLabel, writing only when it differs; a node that is gone
// is left alone.
func (r *Reconciler) markSchedulable(ctx context.Context, name string, schedulable bool) error {
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	want := strconv.FormatBool(schedulable)
	if node.Labels[SchedulableLabel] == want {
		return nil
	}
	patch := client.MergeFrom(node.DeepCopy())
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[SchedulableLabel] = want
	if err := r.Client.Patch(ctx, node, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("label node %s %s=%s: %w", name, SchedulableLabel, want, err)
	}
	return nil
}
