// Package controllers wires Podvirt's controllers (virt-controller's role) into one
// controller-runtime manager: VirtualMachine, VirtualMachineInstance, migration, VMI ReplicaSet
// and node health. cmd/virt-controller and the integration tests both use it, so tests run exactly what
// ships.
package controllers

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	"github.com/podvirt/podvirt/controllers/migration"
	"github.com/podvirt/podvirt/controllers/nodehealth"
	"github.com/podvirt/podvirt/controllers/podtemplate"
	"github.com/podvirt/podvirt/controllers/replicaset"
	"github.com/podvirt/podvirt/controllers/vm"
	"github.com/podvirt/podvirt/controllers/vmi"
	"github.com/podvirt/podvirt/internal/clusterconfig"
)

// Options configures the controllers.
type Options struct {
	// Launcher configures the launcher Pods.
	Launcher podtemplate.Config
	// Namespace is where Podvirt runs: the node agents' heartbeat leases live there.
	Namespace string
	// HeartbeatThreshold is how old a node agent's heartbeat may get before its instances fail.
	HeartbeatThreshold time.Duration
	// ReplicaSetBurst bounds instance creations and deletions per replica set pass.
	ReplicaSetBurst int
	// Clock tells every controller the time; the real clock when nil.
	Clock clock.PassiveClock
	// HealthzAddr, when set, serves clusterconfig.HealthzServer there (KubeVirt's tools call
	// :8443/healthz for the configuration version seen).
	HealthzAddr string
}

// DefaultConcurrentReconciles is how many objects each controller reconciles at once (never one
// object twice at once), unless virt-controller's --concurrent-reconciles says otherwise.
const DefaultConcurrentReconciles = 8

// CacheOptions limits the manager's cache to what the controllers read: launcher Pods only (by
// label), leases and the KubeVirt object (the cluster configuration) in Podvirt's namespace only.
func CacheOptions(o Options) cache.Options {
	kv, kvCache := clusterconfig.CacheByObject(o.Namespace)
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}:           {Label: labels.SelectorFromSet(labels.Set{launcherv1.AppLabel: launcherv1.AppLabelValue})},
		&coordinationv1.Lease{}: {Namespaces: map[string]cache.Config{o.Namespace: {}, corev1.NamespaceNodeLease: {}}},
		kv:                      kvCache,
	}}
}

// AddToManager registers every controller with mgr.
func AddToManager(mgr ctrl.Manager, o Options) error {
	reader := mgr.GetAPIReader()
	c := mgr.GetClient()
	base := clusterconfig.Defaults()
	base.UseEmulation = o.Launcher.UseEmulation
	cluster := &clusterconfig.Source{Reader: c, Namespace: o.Namespace, Base: base}
	if err := clusterconfig.Watch(context.Background(), mgr.GetCache()); err != nil {
		return err
	}
	if o.HealthzAddr != "" {
		if err := mgr.Add(&clusterconfig.HealthzServer{Addr: o.HealthzAddr, Source: cluster}); err != nil {
			return fmt.Errorf("add the healthz server: %w", err)
		}
	}
	disc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	regs := []struct {
		name  string
		setup func(ctrl.Manager) error
	}{
		{"virtualmachine", (&vm.Reconciler{Client: c, APIReader: reader, Recorder: mgr.GetEventRecorder(vm.ControllerName), Clock: o.Clock, Discovery: disc}).SetupWithManager},
		{"virtualmachineinstance", (&vmi.Reconciler{Client: c, APIReader: reader, Recorder: mgr.GetEventRecorder(vmi.ControllerName), Config: o.Launcher, Cluster: cluster, Clock: o.Clock, Discovery: disc}).SetupWithManager},
		{"migration", (&migration.Reconciler{Client: c, APIReader: reader, Recorder: mgr.GetEventRecorder(migration.ControllerName), Config: o.Launcher, Cluster: cluster, Clock: o.Clock}).SetupWithManager},
		{"evacuation", (&migration.EvacuationReconciler{Client: c, Recorder: mgr.GetEventRecorder(migration.ControllerName), Cluster: cluster, Clock: o.Clock}).SetupWithManager},
		{"replicaset", (&replicaset.Reconciler{Client: c, APIReader: reader, Recorder: mgr.GetEventRecorder(replicaset.ControllerName), Burst: o.ReplicaSetBurst, Clock: o.Clock}).SetupWithManager},
		{"nodehealth", (&nodehealth.Reconciler{Client: c, APIReader: reader, Recorder: mgr.GetEventRecorder(nodehealth.ControllerName), Namespace: o.Namespace, Threshold: o.HeartbeatThreshold, Clock: o.Clock}).SetupWithManager},
	}
	for _, r := range regs {
		if err := r.setup(mgr); err != nil {
			return fmt.Errorf("set up %s controller: %w", r.name, err)
		}
	}
	return nil
}
