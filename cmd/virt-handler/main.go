// Command virt-handler is Podvirt's node agent (nodeagent), run as a DaemonSet: it drives the
// VirtualMachineInstances scheduled on its node through their launchers, renews the node's heartbeat
// Lease, serves the pause/unpause subresources on --listen, and advertises /dev/kvm (only where KVM
// is really usable), /dev/net/tun and /dev/vhost-net to the kubelet as a device plugin. Prometheus
// metrics are on --metrics-bind-address (HTTPS, for callers the kube-apiserver authenticates and authorizes), /healthz and /readyz on --health-probe-bind-address.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	"github.com/podvirt/podvirt/internal/boottime"
	"github.com/podvirt/podvirt/internal/clusterconfig"
	"github.com/podvirt/podvirt/internal/metricsauth"
	"github.com/podvirt/podvirt/internal/scheme"
	"github.com/podvirt/podvirt/nodeagent"
	"github.com/podvirt/podvirt/nodeagent/accel"
	"github.com/podvirt/podvirt/nodeagent/deviceplugin"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "virt-handler:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	nodeName, podName, namespace string
	kubeletRoot, devicePluginDir string
	devicePlugins                bool
	deviceCount                  int
	useEmulation                 bool
	listen, tlsSecret            string
	metricsAddr, probeAddr       string
	pollInterval                 time.Duration
	zap                          zap.Options
	hostDiskDir                  string
	qemuCapsDir                  string
	hostDiskBudget               string
	hostDiskImages               int
	budget                       nodeagent.HostDiskBudget
	clockSkews                   string
	skew                         time.Duration
	configHealthzAddr            string
}

func parseFlags(fs *flag.FlagSet, args []string) (*options, error) {
	o := &options{}
	ns := os.Getenv(heartbeatv1.NamespaceEnv)
	if ns == "" {
		ns = heartbeatv1.Namespace
	}
	fs.StringVar(&o.nodeName, "node-name", os.Getenv("NODE_NAME"), "node this agent serves (default $NODE_NAME)")
	fs.StringVar(&o.podName, "pod-name", os.Getenv("POD_NAME"), "the agent's Pod name, the heartbeat lease's holder (default $POD_NAME)")
	fs.StringVar(&o.namespace, "namespace", ns, "namespace of the heartbeat lease (from $"+heartbeatv1.NamespaceEnv+" when set)")
	fs.StringVar(&o.kubeletRoot, "kubelet-root", "/var/lib/kubelet", "the kubelet's root directory, where launcher Pods' emptyDir volumes are")
	fs.StringVar(&o.devicePluginDir, "device-plugin-dir", "", "the kubelet's device plugin directory (default <kubelet-root>/device-plugins)")
	fs.BoolVar(&o.devicePlugins, "device-plugins", true, "advertise /dev/kvm, /dev/net/tun and /dev/vhost-net to the kubelet")
	fs.IntVar(&o.deviceCount, "device-count", 110, "how many launcher Pods may share each device")
	fs.BoolVar(&o.useEmulation, "use-emulation", false, "run guests under software emulation even where KVM is usable (KubeVirt's developerConfiguration.useEmulation)")
	fs.StringVar(&o.listen, "listen", fmt.Sprintf(":%d", agentv1.DefaultPort), "address of the subresource server (mutual TLS: instance paths serve only virt-api, migration streams only the source node's agent)")
	fs.StringVar(&o.tlsSecret, "tls-secret", agentv1.CertSecret, "Secret (in --namespace) with the node CA's ca.crt (the agent's own certificate is signed by virt-api on request)")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8187", "address of the Prometheus metrics endpoint (0 disables it)")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8188", "address of the /healthz and /readyz endpoints")
	fs.StringVar(&o.configHealthzAddr, "config-healthz-bind-address", clusterconfig.DefaultHealthzAddr, "HTTPS address of /healthz with the cluster configuration's version seen, where KubeVirt's tools look (empty disables it; the agent runs in the node's network)")
	fs.DurationVar(&o.pollInterval, "launcher-poll-interval", 2*time.Second, "how often a launcher is asked for its guest's state")
	fs.StringVar(&o.hostDiskDir, "host-disk-dir", launcherv1.HostDiskRoot, "where the node's "+launcherv1.HostDiskRoot+" (hostDisk images) is mounted in the agent")
	fs.StringVar(&o.hostDiskBudget, "host-disk-namespace-budget", resource.NewQuantity(nodeagent.DefaultHostDiskBudget.Bytes, resource.BinarySI).String(), "how large one namespace's hostDisk images on this node may be together (their sizes: what their guests may write); a DiskOrCreate past it is refused")
	fs.IntVar(&o.hostDiskImages, "host-disk-namespace-images", nodeagent.DefaultHostDiskBudget.Images, "how many hostDisk images one namespace may have on this node")
	fs.StringVar(&o.qemuCapsDir, "qemu-capabilities-dir", "", "where a container beside the agent leaves libvirt's cache of qemu's capabilities, probed on this node with the launcher image (virt-launcher probe-capabilities), for emulated guests' launchers; empty: launchers probe qemu themselves")
	o.zap.BindFlags(fs)
	fs.StringVar(&o.clockSkews, "fault-clock-skew", "", "fault injection for tests (make chaos): NODE=DURATION,… — the agent of NODE writes every time (its heartbeat's renewTime, instance status) off by DURATION, e.g. vm-2=90s, as a node whose clock is wrong would")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.devicePluginDir == "" {
		o.devicePluginDir = filepath.Join(o.kubeletRoot, "device-plugins")
	}
	switch {
	case o.kubeletRoot == "":
		return nil, errors.New("--kubelet-root: required")
	case o.listen == "":
		return nil, errors.New("--listen: required")
	case o.tlsSecret == "":
		return nil, errors.New("--tls-secret: required (the subresource server is never served without mutual TLS)")
	case o.deviceCount < 1:
		return nil, fmt.Errorf("--device-count: must be at least 1, got %d", o.deviceCount)
	case o.hostDiskImages < 1:
		return nil, fmt.Errorf("--host-disk-namespace-images: must be at least 1, got %d", o.hostDiskImages)
	}
	q, err := resource.ParseQuantity(o.hostDiskBudget)
	if err != nil || q.Sign() <= 0 {
		return nil, fmt.Errorf("--host-disk-namespace-budget: %q is not a positive quantity", o.hostDiskBudget)
	}
	o.budget = nodeagent.HostDiskBudget{Bytes: q.Value(), Images: o.hostDiskImages}
	if o.skew, err = skewOf(o.clockSkews, o.nodeName); err != nil {
		return nil, err
	}
	return o, nil
}

// maxClockSkew bounds --fault-clock-skew: a day either way.
const maxClockSkew = 24 * time.Hour

// skewOf is the skew that list (NODE=DURATION,…) gives node; 0 when it names another node only.
func skewOf(list, node string) (time.Duration, error) {
	if list == "" {
		return 0, nil
	}
	var skew time.Duration
	for _, item := range strings.Split(list, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(item), "=")
		d, err := time.ParseDuration(value)
		if !ok || name == "" || err != nil || d < -maxClockSkew || d > maxClockSkew {
			return 0, fmt.Errorf("--fault-clock-skew: %q is not NODE=DURATION with a duration within ±%s", item, maxClockSkew)
		}
		if name == node {
			skew = d
		}
	}
	return skew, nil
}

func run(args []string) error {
	o, err := parseFlags(flag.CommandLine, args)
	if err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	log := ctrl.Log.WithName("virt-handler")

	probe := accel.DefaultProbe().Run()
	decision := accel.Decide(o.useEmulation, probe)
	log.Info("Acceleration", "kvmUsable", probe.KVMUsable, "why", probe.Why, "emulation", decision.Emulate, "reason", decision.Reason)

	cfg := nodeagent.Config{
		NodeName: o.nodeName, PodName: o.podName, Namespace: o.namespace, Accel: decision,
		Dial: nodeagent.KubeletDialer(o.kubeletRoot), PollInterval: o.pollInterval, HostDiskDir: o.hostDiskDir,
		HeartbeatInterval: heartbeatv1.RenewInterval, SubresourceAddr: o.listen, ConfigHealthzAddr: o.configHealthzAddr,
	}
	cfg.QemuCapabilitiesDir, cfg.HostDiskBudget = o.qemuCapsDir, o.budget
	if o.skew != 0 {
		log.Info("Clock skewed for fault injection (--fault-clock-skew)", "skew", o.skew.String())
		cfg.Clock = boottime.Clock{Skew: o.skew}
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 scheme.New(),
		Cache:                  nodeagent.CacheOptions(o.nodeName, o.namespace),
		Client:                 nodeagent.ClientOptions(),
		Metrics:                metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: true, FilterProvider: metricsauth.Filter},
		HealthProbeBindAddress: o.probeAddr,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	kube, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("create clientset: %w", err)
	}
	agentTLS := &nodeagent.AgentTLS{
		Reader: mgr.GetAPIReader(), Secret: types.NamespacedName{Namespace: o.namespace, Name: o.tlsSecret},
		CSRs: kube, NodeName: o.nodeName, Refresh: time.Minute, VirtAPIService: agentv1.VirtAPIService,
	}
	if err := mgr.Add(agentTLS); err != nil {
		return fmt.Errorf("add subresource TLS: %w", err)
	}
	cfg.SubresourceTLS, cfg.PeerTLS = agentTLS.TLSConfig(), agentTLS.PeerConfig
	cfg.APICaller = agentv1.VirtAPIIdentity(o.namespace)
	cfg.NodeCheck = agentTLS.NodeCheck
	agent, err := nodeagent.Setup(mgr, cfg)
	if err != nil {
		return err
	}
	if o.devicePlugins {
		if err := mgr.Add(&deviceplugin.Manager{Dir: o.devicePluginDir, Resources: resources(probe, o.deviceCount)}); err != nil {
			return fmt.Errorf("add device plugin: %w", err)
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("heartbeat", agent.Heartbeat.Check); err != nil {
		return fmt.Errorf("add readiness check: %w", err)
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// resources are the devices to advertise: /dev/kvm only where the probe found KVM usable.
func resources(probe accel.Result, count int) []deviceplugin.Resource {
	rs := []deviceplugin.Resource{
		{Name: launcherv1.TunResource, DevicePath: "/dev/net/tun", Count: count},
		{Name: launcherv1.VhostNetResource, DevicePath: "/dev/vhost-net", Count: count},
	}
	if probe.KVMUsable {
		rs = append(rs, deviceplugin.Resource{Name: launcherv1.KVMResource, DevicePath: "/dev/kvm", Count: count})
	}
	return rs
}
