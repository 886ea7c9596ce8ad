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
	"sort"
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
	"github.com/podvirt/podvirt/internal/clusterconfig"
	"github.com/podvirt/podvirt/internal/statuspatch"
)

// ControllerName is the name Events and logs carry.
const ControllerName = "migration-controller"

// UnschedulableTimeout is how long a target Pod may stay unschedulable before the migration fails
// (KubeVirt's default is 5 minutes too).
const UnschedulableTimeout = 5 * time.Minute

// TargetReadyTimeout is how long a target Pod may take, from its creation, to be ready to receive
// the guest (bound, its images pulled, its launcher started and reported by its node agent) before
// the migration fails (KubeVirt's pending timeout is 15 minutes too). Without it a target stuck in
// ContainerCreating would hold one of parallelMigrationsPerCluster's places for ever.
const TargetReadyTimeout = 15 * time.Minute

// Reasons of the migration's Events and failures.
const (
	ReasonNotRunning      = "InstanceNotRunning"
	ReasonNotMigratable   = "NotLiveMigratable"
	ReasonTargetCreated   = virtv1.ReasonSuccessfulCreate
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
	// Cluster is the cluster's configuration: the migration settings a migration begins with, and
	// useEmulation for a target of an instance that does not say how it runs.
	Cluster *clusterconfig.Source
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

// scope is what one pass observed.
type scope struct {
	m *virtv1.VirtualMachineInstanceMigration
	// inst is the migration's instance; nil when it does not exist.
	inst *virtv1.VirtualMachineInstance
	// target is the target launcher Pod named in the instance's migration state while the
	// migration is recorded there and unfinished; nil when absent (confirmed uncached once the
	// Pod has been created).
	target *corev1.Pod
	// render is the target Pod to create while it is absent and the migration Pending; renderErr
	// says why it cannot be.
	render    *corev1.Pod
	renderErr error
	// leftovers are the migration's target Pods that have not ended and do not hold the guest.
	leftovers []*corev1.Pod
	// earlier names an older unfinished migration of the same instance (set while this one has
	// not begun): it goes first, so two never take turns overwriting the instance's state.
	earlier string
	// settings are the cluster's migration settings (read while the migration has not begun).
	settings clusterconfig.Migrations
	// inFlight counts the other migrations in the cluster that have begun and not ended, and ahead
	// the older ones waiting that would begin before this one (counted while this one has not
	// begun, observeOthers): places under parallelMigrationsPerCluster go oldest first.
	inFlight, ahead int
	// outOfNode and aheadOnNode count the same among the migrations out of this instance's node
	// (parallelOutboundMigrationsPerNode).
	outOfNode, aheadOnNode int
	now                    time.Time
}

// Reconcile moves one migration along: scope, decide, one action, one deferred write of its phase.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	m := &virtv1.VirtualMachineInstanceMigration{}
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if m.DeletionTimestamp == nil && !m.Status.Phase.IsFinal() && !controllerutil.ContainsFinalizer(m, virtv1.MigrationFinalizer) {
		patch := client.MergeFrom(m.DeepCopy())
		controllerutil.AddFinalizer(m, virtv1.MigrationFinalizer)
		if err := r.Client.Patch(ctx, m, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	s, err := r.observe(ctx, m)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := decide(s)
	orig := m.DeepCopy()
	defer func() {
		res, retErr = statuspatch.Result(res, retErr, r.writeStatus(ctx, orig, s, d))
	}()
	if err := r.act(ctx, s, d); err != nil {
		// The phase stays what it was: the phase decided assumed the action done.
		if apierrors.IsConflict(err) { // an instance write lost its lock: look again on fresh data
			return ctrl.Result{RequeueAfter: statuspatch.ConflictRetry}, nil
		}
		return ctrl.Result{}, err
	}
	m.Status.Phase = d.phase
	return ctrl.Result{RequeueAfter: d.retryAfter}, nil
}

// observe reads what decide needs. A deleted migration's instance is read uncached: a cache that
// has not yet seen this migration's state on the instance would release the migration and leave
// that state unfinished for ever.
func (r *Reconciler) observe(ctx context.Context, m *virtv1.VirtualMachineInstanceMigration) (*scope, error) {
	s := &scope{m: m, now: r.Clock.Now()}
	reader := client.Reader(r.Client)
	if m.DeletionTimestamp != nil {
		reader = r.APIReader
	}
	inst := &virtv1.VirtualMachineInstance{}
	switch err := reader.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.VMIName}, inst); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("get instance: %w", err)
	default:
		s.inst = inst
	}
	if m.Status.Phase == virtv1.MigrationFailed {
		return s, r.observeLeftovers(ctx, s)
	}
	if s.inst == nil || m.Status.Phase.IsFinal() {
		return s, nil
	}
	ms := s.inst.Status.MigrationState
	pending := m.Status.Phase == "" || m.Status.Phase == virtv1.MigrationPending
	if ms == nil || ms.MigrationUID != string(m.UID) {
		if !pending {
			return s, nil
		}
		settings, err := r.Cluster.Read(ctx)
		if err != nil {
			return nil, err
		}
		s.settings = settings.Migrations
		return s, r.observeOthers(ctx, s)
	}
	if ms.Completed || ms.Failed {
		return s, nil
	}
	key := client.ObjectKey{Namespace: m.Namespace, Name: ms.TargetPod}
	pod := &corev1.Pod{}
	err := r.Client.Get(ctx, key, pod)
	if apierrors.IsNotFound(err) && !pending {
		err = r.APIReader.Get(ctx, key, pod)
	}
	switch {
	case err == nil:
		s.target = pod
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("get target pod: %w", err)
	case pending:
		emulate, err := r.targetEmulates(ctx, s.inst)
		if err != nil {
			return nil, err
		}
		s.render, s.renderErr = r.renderTarget(s.inst, string(m.UID), emulate)
	}
	return s, nil
}

// targetEmulates says whether the target runs the guest emulated, as the source does: by whether
// the source Pod requests /dev/kvm; with the source Pod gone from the cache, by the instance's
// SoftwareEmulation condition; without either, by the cluster's configuration.
func (r *Reconciler) targetEmulates(ctx context.Context, inst *virtv1.VirtualMachineInstance) (bool, error) {
	source := &corev1.Pod{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: inst.Namespace, Name: inst.Status.MigrationState.SourcePod}, source)
	switch {
	case err == nil:
		return !launcherv1.RequestsKVM(source), nil
	case !apierrors.IsNotFound(err):
		return false, fmt.Errorf("get source pod: %w", err)
	}
	if c := meta.FindStatusCondition(inst.Status.Conditions, virtv1.VirtualMachineInstanceSoftwareEmulation); c != nil {
		return c.Status == metav1.ConditionTrue, nil
	}
	settings, err := r.Cluster.Read(ctx)
	return r.Config.UseEmulation || settings.UseEmulation, err
}

// observeOthers reads, in one pass over the cache's migrations, what a migration that has not
// begun waits for: an older unfinished migration of the same instance (it goes first, so two never
// take turns overwriting the instance's state), the migrations that have begun and not ended, in
// the cluster and out of this instance's node, and the older ones waiting that would begin before
// this one (the caps' places go oldest first). An older migration waiting behind its own node's
// cap, or behind another migration of its instance, takes no cluster place ahead of this one:
// else one node's drain would hold every other node's migrations back. An other migration's source
// node is its instance's recorded source once begun, else the node its instance runs on. A
// migration counts as begun from its first phase after Pending: one that began in the last pass is
// not yet counted, so the caps may be passed by the few that begin at once.
func (r *Reconciler) observeOthers(ctx context.Context, s *scope) error {
	list := &virtv1.VirtualMachineInstanceMigrationList{}
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil { // read only
		return fmt.Errorf("list migrations: %w", err)
	}
	type waiting struct {
		node, inst string
		m          *virtv1.VirtualMachineInstanceMigration
	}
	var older []waiting
	fromNode := map[string]int{}  // begun migrations by source node
	instBusy := map[string]bool{} // instances with a begun migration
	for i := range list.Items {
		o := &list.Items[i]
		if o.UID == s.m.UID || o.Status.Phase.IsFinal() || o.DeletionTimestamp != nil {
			continue
		}
		isOlder := olderThan(o, s.m)
		if isOlder && s.earlier == "" && o.Namespace == s.m.Namespace && o.Spec.VMIName == s.m.Spec.VMIName {
			s.earlier = o.Name
		}
		begun := o.Status.Phase != "" && o.Status.Phase != virtv1.MigrationPending
		if !begun && !isOlder {
			continue
		}
		node, err := r.sourceNode(ctx, o)
		if err != nil {
			return err
		}
		inst := o.Namespace + "/" + o.Spec.VMIName
		if begun {
			s.inFlight++
			fromNode[node]++
			instBusy[inst] = true
			continue
		}
		older = append(older, waiting{node: node, inst: inst, m: o})
	}
	sort.Slice(older, func(i, j int) bool { return olderThan(older[i].m, older[j].m) })
	limit := int(s.settings.ParallelOutboundMigrationsPerNode)
	aheadFrom := map[string]int{}
	instBusy[s.m.Namespace+"/"+s.m.Spec.VMIName] = true // its own older ones are s.earlier
	for _, w := range older {
		if instBusy[w.inst] || (limit > 0 && w.node != "" && fromNode[w.node]+aheadFrom[w.node] >= limit) {
			continue
		}
		instBusy[w.inst] = true // an instance's later migrations wait for its oldest
		aheadFrom[w.node]++
		s.ahead++
	}
	node := s.inst.Status.NodeName
	s.outOfNode, s.aheadOnNode = fromNode[node], aheadFrom[node]
	return nil
}

// olderThan orders migrations oldest first (by name within a second).
func olderThan(a, b *virtv1.VirtualMachineInstanceMigration) bool {
	return a.CreationTimestamp.Before(&b.CreationTimestamp) || (a.CreationTimestamp.Equal(&b.CreationTimestamp) && a.Name < b.Name)
}

// sourceNode is the node migration o moves its instance out of, read from the cache without a
// copy: the instance's recorded source once it began, else the node it runs on; "" when the
// instance is gone.
func (r *Reconciler) sourceNode(ctx context.Context, o *virtv1.VirtualMachineInstanceMigration) (string, error) {
	inst := &virtv1.VirtualMachineInstance{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Spec.VMIName}, inst, client.UnsafeDisableDeepCopy); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if ms := inst.Status.MigrationState; ms != nil && ms.MigrationUID == string(o.UID) && ms.SourceNode != "" {
		return ms.SourceNode, nil
	}
	return inst.Status.NodeName, nil
}

// observeLeftovers lists the failed migration's target Pods that still run: uncached (a Pod
// created just before the migration failed may not be in the cache yet, and once the migration is
// released nothing would remove it), only Pods the instance controls (a label anyone who may label
// Pods can set), never the Pod the instance runs in. Without the instance, the garbage collector
// removes the Pods it controlled.
func (r *Reconciler) observeLeftovers(ctx context.Context, s *scope) error {
	if s.inst == nil {
		return nil
	}
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.InNamespace(s.m.Namespace), client.MatchingLabels{launcherv1.MigrationJobLabel: string(s.m.UID)}); err != nil {
		return fmt.Errorf("list target pods: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed ||
			p.Name == s.inst.Status.LauncherPod || !metav1.IsControlledBy(p, s.inst) {
			continue
		}
		s.leftovers = append(s.leftovers, p)
	}
	return nil
}

// renderTarget renders the target launcher Pod exactly as the instance's own, on another node,
// emulated or not as the source runs (targetEmulates).
func (r *Reconciler) renderTarget(inst *virtv1.VirtualMachineInstance, migrationUID string, emulate bool) (*corev1.Pod, error) {
	cfg := r.Config
	cfg.UseEmulation = emulate
	pod, err := podtemplate.RenderPod(inst, cfg)
	if err != nil {
		return nil, err
	}
	pod.Name = inst.Status.MigrationState.TargetPod
	pod.Labels[launcherv1.MigrationJobLabel] = migrationUID
	avoidNode(pod, inst.Status.MigrationState.SourceNode)
	return pod, nil
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

// writeStatus writes the migration's phase if it changed, then records an Event when it ended.
func (r *Reconciler) writeStatus(ctx context.Context, orig *virtv1.VirtualMachineInstanceMigration, s *scope, d decision) error {
	wrote, err := statuspatch.Write(ctx, r.Client, orig, s.m, "migration")
	if err != nil || !wrote || orig.Status.Phase == s.m.Status.Phase {
		return err
	}
	switch s.m.Status.Phase {
	case virtv1.MigrationFailed:
		r.Recorder.Eventf(s.m, nil, corev1.EventTypeWarning, d.reason, "Migrate", "The migration failed: %s", d.message)
	case virtv1.MigrationSucceeded:
		ms := s.inst.Status.MigrationState
		r.Recorder.Eventf(s.m, s.inst, corev1.EventTypeNormal, ReasonMigrated, "Migrate", "The instance moved from %s to %s", ms.SourceNode, ms.TargetNode)
	}
	return nil
}
