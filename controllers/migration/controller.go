// Package migration is the VirtualMachineInstanceMigration controller (KubeVirt's migration
// controller): it records the migration in its instance's status.migrationState, creates the
// target launcher Pod on another node, and follows the node agents' progress into the
// migration's phase. The node agents do the moving (see nodeagent/migration.go): the target's
// prepares its launcher and says where it is reachable (targetNodeAddress), the source's starts
// the transfer (startTimestamp) and, once the guest runs on the target, hands the instance over
// (completed, status.nodeName and launcherPod switched) or records the failure.
package migration

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/controllers/podtemplate"
	"github.com/podvirt/podvirt/internal/statuspatch"
)

// ControllerName is the name Events and logs carry.
const ControllerName = "migration-controller"

// UnschedulableTimeout is how long a target Pod may stay unschedulable before the migration fails
// (KubeVirt's default is 5 minutes too).
const UnschedulableTimeout = 5 * time.Minute

// Reasons of the migration's Events and failures.
const (
	ReasonNotRunning      = "InstanceNotRunning"
	ReasonNotMigratable   = "NotLiveMigratable"
	ReasonTargetPodEnded  = "TargetPodEnded"
	ReasonUnschedulable   = "TargetUnschedulable"
	ReasonTargetCreated   = "SuccessfulCreate"
	ReasonMigrationFailed = "MigrationFailed"
	ReasonMigrated        = "Migrated"
)

// Reconciler reconciles VirtualMachineInstanceMigrations.
type Reconciler struct {
	Client client.Client
	// APIReader reads without the cache: a target Pod missing from the cache is confirmed gone
	// with it before the migration fails (the cache may not have seen the Pod just created).
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Config renders the target launcher Pod exactly as the instance's own.
	Config podtemplate.Config
	// Clock tells the time; the real clock when nil.
	Clock clock.PassiveClock
}

// SetupWithManager registers the controller for migrations, their instances and target Pods.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("virtualmachineinstancemigration").
		For(&virtv1.VirtualMachineInstanceMigration{}).
		Watches(&virtv1.VirtualMachineInstance{}, handler.EnqueueRequestsFromMapFunc(r.migrationsOf)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.migrationOfPod)).
		Complete(r)
}

// migrationsOf maps an instance to the unfinished migrations of it.
func (r *Reconciler) migrationsOf(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &virtv1.VirtualMachineInstanceMigrationList{}
	if err := r.Client.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if m := &list.Items[i]; m.Spec.VMIName == obj.GetName() && !m.Status.Phase.IsFinal() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(m)})
		}
	}
	return out
}

// migrationOfPod maps a target launcher Pod to its migration.
func (r *Reconciler) migrationOfPod(ctx context.Context, obj client.Object) []reconcile.Request {
	uid := obj.GetLabels()[launcherv1.MigrationJobLabel]
	if uid == "" {
		return nil
	}
	list := &virtv1.VirtualMachineInstanceMigrationList{}
	if err := r.Client.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	for i := range list.Items {
		if string(list.Items[i].UID) == uid {
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}}
		}
	}
	return nil
}

// Reconcile moves one migration along and writes its phase once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	m := &virtv1.VirtualMachineInstanceMigration{}
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if m.DeletionTimestamp != nil {
		return ctrl.Result{}, r.reconcileDelete(ctx, m)
	}
	if !m.Status.Phase.IsFinal() && !controllerutil.ContainsFinalizer(m, virtv1.MigrationFinalizer) {
		patch := client.MergeFrom(m.DeepCopy())
		controllerutil.AddFinalizer(m, virtv1.MigrationFinalizer)
		if err := r.Client.Patch(ctx, m, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	orig := m.DeepCopy()
	defer func() {
		_, err := statuspatch.Write(ctx, r.Client, orig, m, "migration")
		res, retErr = statuspatch.Result(res, retErr, err)
	}()
	if m.Status.Phase.IsFinal() {
		if err := r.removeFailedTarget(ctx, m, nil); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.release(ctx, m); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.collect(ctx, m)
	}
	if m.Status.Phase == "" {
		m.Status.Phase = virtv1.MigrationPending
	}
	inst := &virtv1.VirtualMachineInstance{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.VMIName}, inst)
	if apierrors.IsNotFound(err) {
		r.fail(m, ReasonNotRunning, fmt.Sprintf("spec.vmiName: instance %s does not exist", m.Spec.VMIName))
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("get instance: %w", err)
	}
	return r.reconcileNormal(ctx, m, inst)
}

func (r *Reconciler) reconcileNormal(ctx context.Context, m *virtv1.VirtualMachineInstanceMigration, inst *virtv1.VirtualMachineInstance) (ctrl.Result, error) {
	ms := inst.Status.MigrationState
	ours := ms != nil && ms.MigrationUID == string(m.UID)
	if !ours {
		if ms != nil && !ms.Completed && !ms.Failed {
			return ctrl.Result{}, nil // another migration of the instance runs: wait for it
		}
		if why := notMigratable(inst); why != "" {
			r.fail(m, ReasonNotMigratable, why)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, r.begin(ctx, m, inst)
	}
	switch {
	case ms.Completed:
		m.Status.Phase = virtv1.MigrationSucceeded
		r.Recorder.Eventf(m, inst, corev1.EventTypeNormal, ReasonMigrated, "Migrate", "The instance moved from %s to %s", ms.SourceNode, ms.TargetNode)
		return ctrl.Result{}, nil
	case ms.Failed:
		r.fail(m, ReasonMigrationFailed, ms.FailureReason)
		return ctrl.Result{}, r.removeFailedTarget(ctx, m, inst)
	case inst.Status.Phase != virtv1.Running || inst.DeletionTimestamp != nil:
		return ctrl.Result{}, r.failInstanceMigration(ctx, m, inst, fmt.Sprintf("the instance stopped running (phase %s)", inst.Status.Phase))
	}
	pod, err := r.targetPod(ctx, m, inst)
	if err != nil || pod == nil {
		return ctrl.Result{}, err
	}
	if why := r.targetProblem(pod); why != "" {
		return ctrl.Result{}, r.failInstanceMigration(ctx, m, inst, why)
	}
	return r.follow(ctx, m, inst, pod)
}

// notMigratable says why the instance cannot be migrated now ("" when it can).
func notMigratable(inst *virtv1.VirtualMachineInstance) string {
	if inst.Status.Phase != virtv1.Running || inst.Status.NodeName == "" || inst.DeletionTimestamp != nil {
		return fmt.Sprintf("instance %s is not running (phase %q)", inst.Name, inst.Status.Phase)
	}
	if c := meta.FindStatusCondition(inst.Status.Conditions, virtv1.VirtualMachineInstanceLiveMigratable); c != nil && c.Status == metav1.ConditionFalse {
		return fmt.Sprintf("instance %s is not live-migratable: %s", inst.Name, c.Message)
	}
	return ""
}

// begin records the migration in the instance's status; the next pass creates the target Pod.
func (r *Reconciler) begin(ctx context.Context, m *virtv1.VirtualMachineInstanceMigration, inst *virtv1.VirtualMachineInstance) error {
	orig := inst.DeepCopy()
	inst.Status.MigrationState = &virtv1.VirtualMachineInstanceMigrationState{
		MigrationUID: string(m.UID),
		SourceNode:   inst.Status.NodeName,
		SourcePod:    inst.Status.LauncherPod,
		TargetPod:    podtemplate.TargetPodName(inst, string(m.UID)),
		Mode:         virtv1.MigrationPreCopy,
	}
	_, err := statuspatch.Write(ctx, r.Client, orig, inst, "instance")
	return err
}

// targetPod returns the target launcher Pod, creating it when absent (nil then: its creation
// brings the next pass).
func (r *Reconciler) targetPod(ctx context.Context, m *virtv1.VirtualMachineInstanceMigration, inst *virtv1.VirtualMachineInstance) (*corev1.Pod, error) {
	ms := inst.Status.MigrationState
	pod := &corev1.Pod{}
	key := client.ObjectKey{Namespace: inst.Namespace, Name: ms.TargetPod}
	err := r.Client.Get(ctx, key, pod)
	if apierrors.IsNotFound(err) && m.Status.Phase != virtv1.MigrationPending {
		err = r.APIReader.Get(ctx, key, pod)
	}
	if err == nil {
		return pod, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("get target pod: %w", err)
	}
	if m.Status.Phase != virtv1.MigrationPending {
		return nil, r.failInstanceMigration(ctx, m, inst, fmt.Sprintf("the target Pod %s was deleted", ms.TargetPod))
	}
	pod, err = podtemplate.RenderPod(inst, r.Config)
	if err != nil {
		return nil, r.failInstanceMigration(ctx, m, inst, fmt.Sprintf("cannot render the target Pod: %v", err))
	}
	pod.Name = ms.TargetPod
	pod.Labels[launcherv1.MigrationJobLabel] = string(m.UID)
	avoidNode(pod, ms.SourceNode)
	if err := r.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create target pod: %w", err)
	}
	m.Status.Phase = virtv1.MigrationScheduling
	r.Recorder.Eventf(m, pod, corev1.EventTypeNormal, ReasonTargetCreated, "Create", "Created migration target pod %s", pod.Name)
	return nil, nil
}

// avoidNode requires the Pod to run anywhere but node: added to every required node selector
// term the instance has (they are ORed), or as the only term.
func avoidNode(pod *corev1.Pod, node string) {
	req := corev1.NodeSelectorRequirement{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpNotIn, Values: []string{node}}
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	} else {
		pod.Spec.Affinity = pod.Spec.Affinity.DeepCopy()
	}
	a := pod.Spec.Affinity
	if a.NodeAffinity == nil {
		a.NodeAffinity = &corev1.NodeAffinity{}
	}
	sel := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if sel == nil || len(sel.NodeSelectorTerms) == 0 {
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req}}},
		}
		return
	}
	for i := range sel.NodeSelectorTerms {
		sel.NodeSelectorTerms[i].MatchExpressions = append(sel.NodeSelectorTerms[i].MatchExpressions, req)
	}
}

// targetProblem says why the target Pod cannot receive the guest ("" while it can).
func (r *Reconciler) targetProblem(pod *corev1.Pod) string {
	switch {
	case pod.DeletionTimestamp != nil:
		return fmt.Sprintf("the target Pod %s is being deleted", pod.Name)
	case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
		return fmt.Sprintf("the target Pod %s ended (%s)", pod.Name, pod.Status.Phase)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
			r.Clock.Since(pod.CreationTimestamp.Time) > UnschedulableTimeout {
			return fmt.Sprintf("the target Pod %s could not be scheduled within %s: %s", pod.Name, UnschedulableTimeout, c.Message)
		}
	}
	return ""
}

// follow turns the target Pod's and the agents' progress into the migration's phase.
func (r *Reconciler) follow(ctx context.Context, m *virtv1.VirtualMachineInstanceMigration, inst *virtv1.VirtualMachineInstance, pod *corev1.Pod) (ctrl.Result, error) {
	ms := inst.Status.MigrationState
	switch {
	case ms.StartTimestamp != nil:
		m.Status.Phase = virtv1.MigrationRunning
	case ms.TargetNodeAddress != "":
		m.Status.Phase = virtv1.MigrationTargetReady
	case pod.Status.Phase == corev1.PodRunning:
		m.Status.Phase = virtv1.MigrationPreparingTarget
		if ms.TargetNode != pod.Spec.NodeName {
			orig := inst.DeepCopy()
			inst.Status.MigrationState.TargetNode = pod.Spec.NodeName
			if _, err := statuspatch.Write(ctx, r.Client, orig, inst, "instance"); err != nil {
				return ctrl.Result{}, err
			}
		}
	case pod.Spec.NodeName != "":
		m.Status.Phase = virtv1.MigrationScheduled
	default:
		m.Status.Phase = virtv1.MigrationScheduling
		// Come back when an unschedulable target has waited long enough to give up.
		return ctrl.Result{RequeueAfter: UnschedulableTimeout}, nil
	}
	return ctrl.Result{}, nil
}

// failInstanceMigration records the failure in the instance's migration state (the source's
// agent stops waiting for the target) and fails the migration.
//
// Once the target is ready the source's agent may start the transfer at any moment (it records
// the start only after asking its launcher), and once started only it may end it (the guest may be
// arriving at the target right now): the controller asks for an abort (abortRequested) and the
// agent records the outcome — unless the instance no longer runs at all.
func (r *Reconciler) failInstanceMigration(ctx context.Context, m *virtv1.VirtualMachineInstanceMigration, inst *virtv1.VirtualMachineInstance, why string) error {
	orig := inst.DeepCopy()
	ms := inst.Status.MigrationState
	if (ms.TargetNodeAddress != "" || ms.StartTimestamp != nil) && inst.Status.Phase == virtv1.Running && inst.DeletionTimestamp == nil {
		if !ms.AbortRequested {
			ms.AbortRequested, ms.AbortStatus = true, virtv1.MigrationAbortInProgress
			r.Recorder.Eventf(m, inst, corev1.EventTypeWarning, ReasonMigrationFailed, "Abort", "Aborting the migration: %s", why)
		}
		_, err := statuspatch.Write(ctx, r.Client, orig, inst, "instance")
		return err
	}
	now := metav1.NewTime(r.Clock.Now())
	ms.Failed, ms.FailureReason, ms.EndTimestamp = true, why, &now
	if _, err := statuspatch.Write(ctx, r.Client, orig, inst, "instance"); err != nil {
		return err
	}
	r.fail(m, ReasonMigrationFailed, why)
	return r.removeFailedTarget(ctx, m, inst)
}

// reconcileDelete aborts the migration of a deleted migration that has not ended: before the
// transfer started it fails at once; a running transfer is aborted by the source's node agent
// (migrationState.abortRequested) and fails. The finalizer goes once the migration has ended.
func (r *Reconciler) reconcileDelete(ctx context.Context, m *virtv1.VirtualMachineInstanceMigration) error {
	if !controllerutil.ContainsFinalizer(m, virtv1.MigrationFinalizer) {
		return nil
	}
	// Uncached: a cache that has not yet seen this migration's state on the instance would release
	// it and leave that state unfinished for ever.
	inst := &virtv1.VirtualMachineInstance{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.VMIName}, inst)
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("get instance: %w", err)
	}
	if err != nil {
		inst = nil
	}
	ms := (*virtv1.VirtualMachineInstanceMigrationState)(nil)
	if inst != nil && inst.Status.MigrationState != nil && inst.Status.MigrationState.MigrationUID == string(m.UID) {
		ms = inst.Status.MigrationState
	}
	switch {
	case ms != nil && ms.Completed:
		return r.release(ctx, m) // it ended well before the abort could act: nothing to undo
	case ms != nil && !ms.Failed:
		err := r.failInstanceMigration(ctx, m, inst, "the migration was deleted")
		if err != nil || !inst.Status.MigrationState.Failed {
			return err // the source's agent aborts the transfer; its failure brings us back
		}
	}
	m.Status.Phase = virtv1.MigrationFailed
	if err := r.removeFailedTarget(ctx, m, inst); err != nil {
		return err
	}
	return r.release(ctx, m)
}

// release removes the finalizer of an ended migration.
func (r *Reconciler) release(ctx context.Context, m *virtv1.VirtualMachineInstanceMigration) error {
	if !controllerutil.ContainsFinalizer(m, virtv1.MigrationFinalizer) {
		return nil
	}
	patch := client.MergeFrom(m.DeepCopy())
	controllerutil.RemoveFinalizer(m, virtv1.MigrationFinalizer)
	if err := r.Client.Patch(ctx, m, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	return nil
}

// fail ends the migration as Failed, saying why in an Event.
func (r *Reconciler) fail(m *virtv1.VirtualMachineInstanceMigration, reason, why string) {
	if m.Status.Phase != virtv1.MigrationFailed {
		r.Recorder.Eventf(m, nil, corev1.EventTypeWarning, reason, "Migrate", "The migration failed: %s", why)
	}
	m.Status.Phase = virtv1.MigrationFailed
}

// removeFailedTarget deletes the target Pod of a failed migration (its launcher destroys whatever
// arrived; the guest runs on the source) — never the Pod the instance runs in (inst, read when nil).
func (r *Reconciler) removeFailedTarget(ctx context.Context, m *virtv1.VirtualMachineInstanceMigration, inst *virtv1.VirtualMachineInstance) error {
	if m.Status.Phase != virtv1.MigrationFailed {
		return nil
	}
	if inst == nil {
		inst = &virtv1.VirtualMachineInstance{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.VMIName}, inst); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("get instance: %w", err)
		}
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(m.Namespace), client.MatchingLabels{launcherv1.MigrationJobLabel: string(m.UID)}); err != nil {
		return fmt.Errorf("list target pods: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.Name == inst.Status.LauncherPod {
			continue
		}
		if err := r.Client.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete target pod %s: %w", p.Name, err)
		}
	}
	return nil
}
