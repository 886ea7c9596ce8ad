package replicaset

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/statuspatch"
)

// ControllerName is the name Events and logs carry.
const ControllerName = "virtualmachineinstancereplicaset-controller"

// DefaultBurst is the most instances created or deleted in one pass (KubeVirt's limit).
const DefaultBurst = 250

// Reconciler reconciles VirtualMachineInstanceReplicaSets.
type Reconciler struct {
	Client client.Client
	// APIReader re-reads the replica set without the cache before adopting.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Burst bounds creations and deletions per pass; DefaultBurst when 0.
	Burst int
	// Clock tells the time; the real clock when nil.
	Clock clock.PassiveClock

	exp *expectations
}

// SetupWithManager registers the controller: replica sets and every instance (an orphan that
// matches a selector must wake the replica set up).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.exp = newExpectations()
	toReplicaSets := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		if ref := metav1.GetControllerOf(o); ref != nil {
			if ref.Kind != "VirtualMachineInstanceReplicaSet" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}}}
		}
		var list virtv1.VirtualMachineInstanceReplicaSetList
		if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
			ctrl.LoggerFrom(ctx).WithValues("controller", "virtualmachineinstancereplicaset").Error(err,
				"Cannot list the replica sets for an orphaned instance; it is adopted at its next event", "instance", klog.KObj(o))
			return nil
		}
		var reqs []reconcile.Request
		for i := range list.Items {
			if sel, err := metav1.LabelSelectorAsSelector(list.Items[i].Spec.Selector); err == nil && sel.Matches(labels.Set(o.GetLabels())) {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
		}
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("virtualmachineinstancereplicaset").
		For(&virtv1.VirtualMachineInstanceReplicaSet{}).
		Watches(&virtv1.VirtualMachineInstance{}, toReplicaSets).
		Complete(r)
}

// Reconcile claims instances, scales towards spec.replicas and writes the status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	rs := &virtv1.VirtualMachineInstanceReplicaSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, rs); err != nil {
		if apierrors.IsNotFound(err) {
			r.exp.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if rs.DeletionTimestamp != nil {
		r.exp.forget(req.NamespacedName)
		return ctrl.Result{}, nil // the garbage collector removes the instances
	}
	orig := rs.DeepCopy()
	defer func() {
		_, err := statuspatch.Write(ctx, r.Client, orig, rs, "replica set")
		res, retErr = statuspatch.Result(res, retErr, err)
	}()

	selector, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err == nil && selector.Empty() {
		err = fmt.Errorf("spec.selector selects everything; it must match the template's labels only")
	}
	if err == nil && !selector.Matches(labels.Set(rs.Spec.Template.ObjectMeta.Labels)) {
		err = fmt.Errorf("spec.selector does not match spec.template.metadata.labels")
	}
	if err != nil {
		setFailure(rs, "InvalidSelector", err)
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	rs.Status.LabelSelector = selector.String()

	var all virtv1.VirtualMachineInstanceList
	if err := r.Client.List(ctx, &all, client.InNamespace(rs.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("list instances: %w", err)
	}
	byName := map[string]*virtv1.VirtualMachineInstance{}
	for i := range all.Items {
		byName[all.Items[i].Name] = &all.Items[i]
	}
	present := func(name string) bool { v, ok := byName[name]; return ok && v.DeletionTimestamp == nil }
	if !r.exp.satisfied(req.NamespacedName, present, r.Clock.Now()) {
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil // our own writes are on their way
	}

	owned, err := r.claim(ctx, rs, selector, all.Items)
	if err != nil {
		setFailure(rs, "FailedClaim", err)
		return ctrl.Result{}, err
	}
	active := setStatus(rs, owned)
	if rs.Spec.Paused {
		return ctrl.Result{}, nil
	}
	created, deleted, err := r.scale(ctx, rs, owned, active)
	r.exp.expect(req.NamespacedName, created, deleted, r.Clock.Now())
	if err != nil {
		return ctrl.Result{}, err
	}
	meta.RemoveStatusCondition(&rs.Status.Conditions, virtv1.VirtualMachineInstanceReplicaSetReplicaFailure)
	return ctrl.Result{}, nil
}

// claim adopts matching orphans and releases owned instances that no longer match; it returns the
// instances this replica set controls.
func (r *Reconciler) claim(ctx context.Context, rs *virtv1.VirtualMachineInstanceReplicaSet, selector labels.Selector, all []virtv1.VirtualMachineInstance) ([]*virtv1.VirtualMachineInstance, error) {
	var owned []*virtv1.VirtualMachineInstance
	rechecked := false
	for i := range all {
		vmi := &all[i]
		matches := selector.Matches(labels.Set(vmi.Labels))
		ref := metav1.GetControllerOf(vmi)
		switch {
		case ref != nil && ref.UID == rs.UID && matches:
			owned = append(owned, vmi)
		case ref != nil && ref.UID == rs.UID && vmi.DeletionTimestamp == nil:
			patch := client.MergeFromWithOptions(vmi.DeepCopy(), client.MergeFromWithOptimisticLock{})
			controllerutil.RemoveControllerReference(rs, vmi, r.Client.Scheme()) //nolint:errcheck // only fails when not owned
			if err := r.Client.Patch(ctx, vmi, patch); client.IgnoreNotFound(err) != nil {
				return nil, fmt.Errorf("release instance %s: %w", vmi.Name, err)
			}
			r.Recorder.Eventf(rs, vmi, corev1.EventTypeNormal, "SuccessfulRelease", "Release", "Released instance %s: its labels no longer match", vmi.Name)
		case ref == nil && matches && vmi.DeletionTimestamp == nil:
			if !rechecked {
				fresh := &virtv1.VirtualMachineInstanceReplicaSet{}
				if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(rs), fresh); err != nil {
					return nil, fmt.Errorf("re-check replica set before adoption: %w", err)
				}
				if fresh.UID != rs.UID || fresh.DeletionTimestamp != nil {
					return nil, fmt.Errorf("replica set changed during adoption; retrying")
				}
				rechecked = true
			}
			patch := client.MergeFromWithOptions(vmi.DeepCopy(), client.MergeFromWithOptimisticLock{})
			if err := controllerutil.SetControllerReference(rs, vmi, r.Client.Scheme()); err != nil {
				return nil, fmt.Errorf("adopt instance %s: %w", vmi.Name, err)
			}
			if err := r.Client.Patch(ctx, vmi, patch); err != nil {
				return nil, fmt.Errorf("adopt instance %s: %w", vmi.Name, err)
			}
			r.Recorder.Eventf(rs, vmi, corev1.EventTypeNormal, "SuccessfulAdopt", "Adopt", "Adopted instance %s", vmi.Name)
			owned = append(owned, vmi)
		}
	}
	return owned, nil
}

// setStatus computes replicas, readyReplicas and the Paused condition; it returns the owned
// instances that count (not final, not deleting).
func setStatus(rs *virtv1.VirtualMachineInstanceReplicaSet, owned []*virtv1.VirtualMachineInstance) []*virtv1.VirtualMachineInstance {
	var active []*virtv1.VirtualMachineInstance
	ready := 0
	for _, vmi := range owned {
		if vmi.DeletionTimestamp != nil || vmi.Status.Phase.IsFinal() {
			continue
		}
		active = append(active, vmi)
		if meta.IsStatusConditionTrue(vmi.Status.Conditions, virtv1.VirtualMachineInstanceReady) {
			ready++
		}
	}
	rs.Status.Replicas = int32(len(active))
	rs.Status.ReadyReplicas = int32(ready)
	if rs.Spec.Paused {
		meta.SetStatusCondition(&rs.Status.Conditions, metav1.Condition{Type: virtv1.VirtualMachineInstanceReplicaSetPaused, Status: metav1.ConditionTrue, Reason: "Paused", Message: "The replica set is paused: it neither creates nor deletes instances", ObservedGeneration: rs.Generation})
	} else {
		meta.RemoveStatusCondition(&rs.Status.Conditions, virtv1.VirtualMachineInstanceReplicaSetPaused)
	}
	return active
}

func setFailure(rs *virtv1.VirtualMachineInstanceReplicaSet, reason string, err error) {
	meta.SetStatusCondition(&rs.Status.Conditions, metav1.Condition{Type: virtv1.VirtualMachineInstanceReplicaSetReplicaFailure, Status: metav1.ConditionTrue, Reason: reason, Message: err.Error(), ObservedGeneration: rs.Generation})
}

// scale deletes finished instances and creates or deletes up to Burst instances towards
// spec.replicas. It returns the names it created and deleted.
func (r *Reconciler) scale(ctx context.Context, rs *virtv1.VirtualMachineInstanceReplicaSet, owned, active []*virtv1.VirtualMachineInstance) (created, deleted []string, err error) {
	burst := r.Burst
	if burst <= 0 {
		burst = DefaultBurst
	}
	want := rs.Spec.WantedReplicas()
	var victims []*virtv1.VirtualMachineInstance
	for _, vmi := range owned {
		if vmi.DeletionTimestamp == nil && vmi.Status.Phase.IsFinal() {
			victims = append(victims, vmi) // replaced below
		}
	}
	if surplus := len(active) - int(want); surplus > 0 {
		victims = append(victims, pickVictims(active, surplus)...)
	}
	for _, vmi := range victims[:min(len(victims), burst)] {
		if err := r.Client.Delete(ctx, vmi); client.IgnoreNotFound(err) != nil {
			setFailure(rs, "FailedDelete", err)
			r.Recorder.Eventf(rs, vmi, corev1.EventTypeWarning, "FailedDelete", "Delete", "Error deleting instance %s: %v", vmi.Name, err)
			return created, deleted, fmt.Errorf("delete instance %s: %w", vmi.Name, err)
		}
		deleted = append(deleted, vmi.Name)
		r.Recorder.Eventf(rs, vmi, corev1.EventTypeNormal, virtv1.ReasonSuccessfulDelete, "Delete", "Deleted virtual machine instance: %s", vmi.Name)
	}
	for range min(int(want)-len(active), burst) {
		vmi := newInstance(rs)
		if err := controllerutil.SetControllerReference(rs, vmi, r.Client.Scheme()); err != nil {
			return created, deleted, fmt.Errorf("set owner: %w", err)
		}
		if err := r.Client.Create(ctx, vmi); err != nil {
			setFailure(rs, virtv1.ReasonFailedCreate, err)
			r.Recorder.Eventf(rs, nil, corev1.EventTypeWarning, virtv1.ReasonFailedCreate, "Create", "Error creating instance: %v", err)
			return created, deleted, fmt.Errorf("create instance: %w", err)
		}
		created = append(created, vmi.Name)
		r.Recorder.Eventf(rs, vmi, corev1.EventTypeNormal, virtv1.ReasonSuccessfulCreate, "Create", "Created virtual machine instance: %s", vmi.Name)
	}
	return created, deleted, nil
}

// pickVictims chooses n instances to delete: not yet running before running, not ready before
// ready, newest first — the cheapest to lose.
func pickVictims(active []*virtv1.VirtualMachineInstance, n int) []*virtv1.VirtualMachineInstance {
	c := append([]*virtv1.VirtualMachineInstance{}, active...)
	rank := func(v *virtv1.VirtualMachineInstance) int {
		switch {
		case v.Status.Phase != virtv1.Running:
			return 0
		case !meta.IsStatusConditionTrue(v.Status.Conditions, virtv1.VirtualMachineInstanceReady):
			return 1
		}
		return 2
	}
	sort.SliceStable(c, func(i, j int) bool {
		if ri, rj := rank(c[i]), rank(c[j]); ri != rj {
			return ri < rj
		}
		return c[j].CreationTimestamp.Before(&c[i].CreationTimestamp)
	})
	return c[:min(n, len(c))]
}

// newInstance renders an instance from the template.
func newInstance(rs *virtv1.VirtualMachineInstanceReplicaSet) *virtv1.VirtualMachineInstance {
	tmpl := rs.Spec.Template.DeepCopy()
	return &virtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: rs.Name + "-",
			Namespace:    rs.Namespace,
			Labels:       tmpl.ObjectMeta.Labels,
			Annotations:  tmpl.ObjectMeta.Annotations,
			Finalizers:   []string{virtv1.VirtualMachineControllerFinalizer},
		},
		Spec: tmpl.Spec,
	}
}
