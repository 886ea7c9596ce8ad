package migration

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/clusterconfig"
)

// EvacuationRetry is how long after a failed migration an instance still marked for evacuation is
// migrated again.
const EvacuationRetry = time.Minute

// Events of evacuations: a migration created for one, and an evacuation given up after
// virtv1.MaxEvacuationAttempts failed migrations.
const (
	ReasonEvacuating       = "EvacuationMigrationCreated"
	ReasonEvacuationFailed = "EvacuationFailed"
)

// EvacuationReconciler migrates the instances marked for evacuation (status.evacuationNodeName:
// virt-api's eviction webhook sets it when it refuses the eviction of their launcher Pod, e.g.
// during kubectl drain) off that node, one migration at a time. The source's node agent clears the
// mark when the instance has moved. After virtv1.MaxEvacuationAttempts failed migrations it gives
// up, saying so in an Event, and the webhook lets the eviction through: a drain always ends.
type EvacuationReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Cluster is the cluster's configuration: its evictionStrategy for instances that set none.
	Cluster *clusterconfig.Source
	// Clock tells the time; the real clock when nil.
	Clock clock.PassiveClock
}

// SetupWithManager registers the reconciler for marked instances.
func (r *EvacuationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	marked := predicate.NewPredicateFuncs(func(o client.Object) bool {
		v, ok := o.(*virtv1.VirtualMachineInstance)
		return ok && v.Status.EvacuationNodeName != "" && !externallyEvacuated(v)
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("evacuation").
		For(&virtv1.VirtualMachineInstance{}, builder.WithPredicates(marked)).
		Complete(r)
}

// Reconcile creates a migration for a marked instance that none is moving yet.
func (r *EvacuationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	inst := &virtv1.VirtualMachineInstance{}
	if err := r.Client.Get(ctx, req.NamespacedName, inst); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	node := inst.Status.EvacuationNodeName
	if node == "" || externallyEvacuated(inst) || inst.Status.NodeName != node || inst.Status.Phase != virtv1.Running || inst.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	if inst.Spec.EvictionStrategy == nil { // the cluster's default applies
		settings, err := r.Cluster.Read(ctx)
		if err != nil {
			return ctrl.Result{}, err
		}
		if s := settings.EvictionStrategy; s != nil && *s == virtv1.EvictionStrategyExternal {
			return ctrl.Result{}, nil
		}
	}
	if ms := inst.Status.MigrationState; ms != nil {
		switch {
		case !ms.Completed && !ms.Failed:
			return ctrl.Result{}, nil // one is running
		case ms.Failed && ms.EndTimestamp != nil && r.Clock.Since(ms.EndTimestamp.Time) < EvacuationRetry:
			return ctrl.Result{RequeueAfter: EvacuationRetry - r.Clock.Since(ms.EndTimestamp.Time)}, nil
		}
	}
	list := &virtv1.VirtualMachineInstanceMigrationList{}
	if err := r.Client.List(ctx, list, client.InNamespace(inst.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("list migrations: %w", err)
	}
	for i := range list.Items {
		if list.Items[i].Spec.VMIName == inst.Name && !list.Items[i].Status.Phase.IsFinal() {
			return ctrl.Result{}, nil
		}
	}
	if failed := virtv1.FailedEvacuations(list.Items, inst, node, r.Clock.Now()); failed >= virtv1.MaxEvacuationAttempts {
		why := ""
		if ms := inst.Status.MigrationState; ms != nil && ms.Failed && ms.FailureReason != "" {
			why = " (last: " + ms.FailureReason + ")"
		}
		r.Recorder.Eventf(inst, nil, corev1.EventTypeWarning, ReasonEvacuationFailed, "Migrate",
			"Gave up moving the instance off node %s after %d failed migrations%s: the eviction of its launcher Pod now stops it", node, failed, why)
		return ctrl.Result{}, nil
	}
	m := &virtv1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{Namespace: inst.Namespace, GenerateName: "kubevirt-evacuation-",
			Annotations: map[string]string{virtv1.EvacuationNodeAnnotation: node}},
		Spec: virtv1.VirtualMachineInstanceMigrationSpec{VMIName: inst.Name},
	}
	if err := r.Client.Create(ctx, m); err != nil {
		return ctrl.Result{}, fmt.Errorf("create evacuation migration: %w", err)
	}
	r.Recorder.Eventf(inst, m, corev1.EventTypeNormal, ReasonEvacuating, "Migrate", "Migrating the instance off node %s (%s)", node, m.Name)
	return ctrl.Result{}, nil
}

// externallyEvacuated: evictionStrategy External leaves an evacuation to another controller (an
// instance that sets none has the cluster's default, which Reconcile reads).
func externallyEvacuated(vmi *virtv1.VirtualMachineInstance) bool {
	return vmi.Spec.EvictionStrategy != nil && *vmi.Spec.EvictionStrategy == virtv1.EvictionStrategyExternal
}
