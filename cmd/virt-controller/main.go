// Command virt-controller runs Podvirt's cluster-wide controllers (VirtualMachine,
// VirtualMachineInstance, VMI ReplicaSet, node health) with leader election, Prometheus metrics (HTTPS, for callers the kube-apiserver authenticates and authorizes) on
// --metrics-bind-address and health/readiness probes on --health-probe-bind-address.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	"github.com/podvirt/podvirt/controllers"
	"github.com/podvirt/podvirt/controllers/podtemplate"
	"github.com/podvirt/podvirt/internal/clusterconfig"
	"github.com/podvirt/podvirt/internal/metricsauth"
	"github.com/podvirt/podvirt/internal/scheme"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "virt-controller:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		o                        controllers.Options
		metricsAddr, probeAddr   string
		leaderElect              bool
		fixed, perVCPU, emulated string
		pullPolicy               string
		diskPullPolicy           string
		workers                  int
	)
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = heartbeatv1.Namespace
	}
	def, defStorage := podtemplate.DefaultOverhead(), podtemplate.DefaultStorage()
	var storageFixed, storagePerDisk string
	flag.StringVar(&storageFixed, "storage-fixed", defStorage.Fixed.String(), "node disk a launcher Pod may use besides its disks (ISOs, serial log, libvirt's files)")
	flag.StringVar(&storagePerDisk, "storage-per-container-disk", defStorage.PerContainerDisk.String(), "node disk one containerDisk volume may use: its image's copy and the guest's writes over it")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint (0 disables it)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	flag.StringVar(&o.HealthzAddr, "config-healthz-bind-address", clusterconfig.DefaultHealthzAddr, "HTTPS address of /healthz with the cluster configuration's version seen, where KubeVirt's tools look (empty disables it)")
	flag.BoolVar(&leaderElect, "leader-elect", true, "elect a leader so only one replica acts at a time")
	flag.StringVar(&o.Namespace, "namespace", ns, "namespace of Podvirt's components (node agent heartbeats, leader lease)")
	flag.StringVar(&o.Launcher.LauncherImage, "launcher-image", "docker.io/podvirt/virt-launcher:dev", "image of the launcher Pods")
	flag.StringVar(&pullPolicy, "launcher-pull-policy", string(corev1.PullIfNotPresent), "pull policy of the launcher image")
	flag.StringVar(&diskPullPolicy, "disk-image-pull-policy", "", "pull policy of containerDisk/kernelBoot images that name none (default: Kubernetes' rule; IfNotPresent for clusters with locally imported images)")
	flag.BoolVar(&o.Launcher.UseEmulation, "use-emulation", false, "run guests under software emulation: do not request /dev/kvm")
	flag.Int64Var(&o.Launcher.LauncherUID, "launcher-uid", launcherv1.LauncherUID, "non-root user the launcher Pods run as")
	flag.StringVar(&fixed, "overhead-fixed", def.Fixed.String(), "launcher Pod memory beyond the guest's: fixed part")
	flag.StringVar(&perVCPU, "overhead-per-vcpu", def.PerVCPU.String(), "launcher Pod memory beyond the guest's: per virtual CPU")
	flag.StringVar(&emulated, "overhead-emulation", def.Emulation.String(), "launcher Pod memory beyond the guest's: extra under software emulation")
	flag.DurationVar(&o.HeartbeatThreshold, "node-heartbeat-threshold", 2*heartbeatv1.LeaseDuration, "age after which a node agent's heartbeat counts as lost")
	flag.IntVar(&o.ReplicaSetBurst, "replicaset-burst", 250, "most instances a replica set creates or deletes in one pass")
	flag.IntVar(&workers, "concurrent-reconciles", controllers.DefaultConcurrentReconciles, "objects each controller reconciles at once (different objects; one object is never reconciled twice at once)")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	if o.HeartbeatThreshold < heartbeatv1.MinThreshold {
		return fmt.Errorf("--node-heartbeat-threshold: %s is shorter than %s (the agent's vouching limit plus the launchers' self-fencing limit and a margin): a VM on a lost node could run twice", o.HeartbeatThreshold, heartbeatv1.MinThreshold)
	}
	o.Launcher.LauncherPullPolicy = corev1.PullPolicy(pullPolicy)
	o.Launcher.DiskImagePullPolicy = corev1.PullPolicy(diskPullPolicy)
	for flagName, p := range map[string]corev1.PullPolicy{"--launcher-pull-policy": o.Launcher.LauncherPullPolicy, "--disk-image-pull-policy": o.Launcher.DiskImagePullPolicy} {
		switch p {
		case "", corev1.PullAlways, corev1.PullNever, corev1.PullIfNotPresent:
		default:
			return fmt.Errorf("%s: %q is not one of Always, Never, IfNotPresent", flagName, p)
		}
	}
	for flagName, q := range map[string]struct {
		in  string
		out *resource.Quantity
	}{
		"--overhead-fixed":             {fixed, &o.Launcher.Overhead.Fixed},
		"--overhead-per-vcpu":          {perVCPU, &o.Launcher.Overhead.PerVCPU},
		"--overhead-emulation":         {emulated, &o.Launcher.Overhead.Emulation},
		"--storage-fixed":              {storageFixed, &o.Launcher.Storage.Fixed},
		"--storage-per-container-disk": {storagePerDisk, &o.Launcher.Storage.PerContainerDisk},
	} {
		v, err := resource.ParseQuantity(q.in)
		if err != nil {
			return fmt.Errorf("%s: %w", flagName, err)
		}
		if v.Sign() < 0 || (v.IsZero() && strings.HasPrefix(flagName, "--storage")) {
			return fmt.Errorf("%s: %s is not a positive quantity", flagName, q.in)
		}
		*q.out = v
	}

	if workers < 1 {
		return fmt.Errorf("--concurrent-reconciles: must be at least 1, got %d", workers)
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  scheme.New(),
		Controller:              config.Controller{MaxConcurrentReconciles: workers},
		Cache:                   controllers.CacheOptions(o),
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr, SecureServing: true, FilterProvider: metricsauth.Filter},
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "virt-controller.kubevirt.io",
		LeaderElectionNamespace: o.Namespace,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := controllers.AddToManager(mgr, o); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("add readiness check: %w", err)
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
