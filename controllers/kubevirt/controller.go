// Package kubevirt is virt-operator's controller: it keeps the status of the KubeVirt object (the
// cluster's configuration, under KubeVirt's name) current from the health of Podvirt's components in
// its namespace, as KubeVirt's operator reports it, so that KubeVirt's tools and users can wait on
// its Available condition.
package kubevirt

import (
	"context"
	"fmt"
	"runtime"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/statuspatch"
)

// Reconciler keeps the status of the KubeVirt objects in Namespace.
type Reconciler struct {
	Client client.Client
	// Namespace Podvirt is installed in: its components and its KubeVirt object.
	Namespace string
	// Version is the running release, reported as the deployed and the operator's version.
	Version string
	// Clock tells the time; the real clock when nil.
	Clock clock.PassiveClock
}

// SetupWithManager watches the KubeVirt objects and the components' workloads.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	inNamespace := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == r.Namespace })
	all := handler.EnqueueRequestsFromMapFunc(r.allKubeVirts)
	return ctrl.NewControllerManagedBy(mgr).
		Named("kubevirt").
		For(&virtv1.KubeVirt{}, builder.WithPredicates(inNamespace)).
		Watches(&appsv1.Deployment{}, all, builder.WithPredicates(inNamespace)).
		Watches(&appsv1.DaemonSet{}, all, builder.WithPredicates(inNamespace)).
		Complete(r)
}

func (r *Reconciler) allKubeVirts(ctx context.Context, _ client.Object) []reconcile.Request {
	var list virtv1.KubeVirtList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.Namespace)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list kubevirts")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, kv := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&kv)})
	}
	return out
}

// Reconcile reads the components, decides the status and writes it (one write, when it changed).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	kv := &virtv1.KubeVirt{}
	if err := r.Client.Get(ctx, req.NamespacedName, kv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	comps, err := r.components(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := decide(kv.DeletionTimestamp != nil, comps)

	orig := kv.DeepCopy()
	now := metav1.NewTime(r.Clock.Now())
	st := &kv.Status
	st.Phase = d.phase
	for _, c := range d.conditions {
		st.Conditions = setCondition(st.Conditions, c, now)
	}
	st.ObservedGeneration = &kv.Generation
	st.OperatorVersion, st.TargetKubeVirtVersion, st.ObservedKubeVirtVersion = r.Version, r.Version, r.Version
	if st.DefaultArchitecture == "" {
		st.DefaultArchitecture = runtime.GOARCH
	}
	_, err = statuspatch.Write(ctx, r.Client, orig, kv, "kubevirt")
	return statuspatch.Result(ctrl.Result{}, nil, err)
}

// components reads each workload of Components from the cache.
func (r *Reconciler) components(ctx context.Context) ([]health, error) {
	out := make([]health, 0, len(Components))
	for _, c := range Components {
		key := client.ObjectKey{Namespace: r.Namespace, Name: c.Name}
		switch c.Kind {
		case KindDeployment:
			d := &appsv1.Deployment{}
			if err := r.get(ctx, key, d); err != nil {
				return nil, err
			} else if d.Name == "" {
				d = nil
			}
			out = append(out, deploymentHealth(c.Name, d))
		case KindDaemonSet:
			ds := &appsv1.DaemonSet{}
			if err := r.get(ctx, key, ds); err != nil {
				return nil, err
			} else if ds.Name == "" {
				ds = nil
			}
			out = append(out, daemonSetHealth(c.Name, ds))
		}
	}
	return out, nil
}

// get reads obj; an object that is not found is left empty (no name), not an error.
func (r *Reconciler) get(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	if err := r.Client.Get(ctx, key, obj); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("read %s: %w", key, err)
	}
	return nil
}
