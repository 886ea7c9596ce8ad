// Command virt-operator keeps the status of the KubeVirt object (Podvirt's cluster configuration,
// under KubeVirt's name) current from the health of Podvirt's components, with leader election and
// health/readiness probes on --health-probe-bind-address. It deploys nothing: install/ does.
package main

import (
	"flag"
	"fmt"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/controllers/kubevirt"
	"github.com/podvirt/podvirt/internal/scheme"
	"github.com/podvirt/podvirt/internal/version"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "virt-operator:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		ns, probeAddr string
		leaderElect   bool
	)
	def := os.Getenv("POD_NAMESPACE")
	if def == "" {
		def = heartbeatv1.Namespace
	}
	flag.StringVar(&ns, "namespace", def, "namespace Podvirt is installed in: its components and its KubeVirt object")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	flag.BoolVar(&leaderElect, "leader-elect", true, "elect a leader so only one replica acts at a time")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	only := map[string]cache.Config{ns: {}}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme: scheme.New(),
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&virtv1.KubeVirt{}: {Namespaces: only}, &appsv1.Deployment{}: {Namespaces: only}, &appsv1.DaemonSet{}: {Namespaces: only},
		}},
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "virt-operator.kubevirt.io",
		LeaderElectionNamespace: ns,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := (&kubevirt.Reconciler{Client: mgr.GetClient(), Namespace: ns, Version: version.Get().GitVersion}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the kubevirt controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("add readiness check: %w", err)
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
