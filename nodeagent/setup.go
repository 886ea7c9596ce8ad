package nodeagent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/boottime"
	"github.com/podvirt/podvirt/internal/clusterconfig"
	"github.com/podvirt/podvirt/nodeagent/accel"
)

// Config is one node agent's configuration. cmd/virt-handler fills it from flags; the integration
// tests fill it the same way, so they run what ships.
type Config struct {
	// NodeName is the node this agent serves (--node-name).
	NodeName string
	// PodName is the agent's Pod, the heartbeat lease's holder (--pod-name).
	PodName string
	// Namespace holds the heartbeat lease (--namespace).
	Namespace string
	// Accel is how guests run on this node: the probe and --use-emulation.
	Accel accel.Decision
	// Dial reaches launchers: KubeletDialer(--kubelet-root) in production.
	Dial LauncherDialer
	// PollInterval is how often a launcher is asked for its guest's state (--launcher-poll-interval).
	PollInterval time.Duration
	// HeartbeatInterval is how often the lease is renewed (heartbeatv1.RenewInterval).
	HeartbeatInterval time.Duration
	// SubresourceAddr is where the pause/unpause server listens (--listen); empty: no server.
	SubresourceAddr string
	// ConfigHealthzAddr, when set, serves clusterconfig.HealthzServer there: the version of the
	// cluster configuration (the KubeVirt object in Namespace) the agent has seen.
	ConfigHealthzAddr string
	// SubresourceListener, when set, serves the subresources instead of listening on SubresourceAddr.
	SubresourceListener net.Listener
	// SubresourceTLS, when set, serves the subresources over (mutual) TLS; see AgentTLS.
	SubresourceTLS *tls.Config
	// APICaller is virt-api's identity (agentv1.VirtAPIIdentity), required with SubresourceTLS.
	APICaller string
	// PeerTLS, when set, is the client side of the same mutual TLS towards another node's agent (a
	// live migration's streams; AgentTLS.PeerConfig); plain TCP when nil (tests).
	PeerTLS func(node string) (*tls.Config, error)
	// NodeCheck goes with every sync to a launcher (Reconciler.NodeCheck); nil: none.
	NodeCheck func() *launcherv1.NodeCheck
	// Clock tells the time; the real clock when nil.
	Clock clock.PassiveClock
	// HostDiskDir is the node's launcherv1.HostDiskRoot as the agent sees it (--host-disk-dir).
	HostDiskDir string
	// HostDiskBudget bounds each namespace's hostDisk images (zero: DefaultHostDiskBudget).
	HostDiskBudget HostDiskBudget
	// QemuCapabilitiesDir is where the agent's Pod leaves libvirt's cache of qemu's capabilities
	// (see QemuCapabilities); empty: every launcher probes qemu itself.
	QemuCapabilitiesDir string
}

// Validate reports the first missing or invalid setting, naming its flag.
func (c Config) Validate() error {
	switch {
	case c.NodeName == "":
		return errors.New("--node-name: required (set NODE_NAME from spec.nodeName)")
	case c.PodName == "":
		return errors.New("--pod-name: required (set POD_NAME from metadata.name)")
	case c.Namespace == "":
		return errors.New("--namespace: required")
	case c.Dial == nil:
		return errors.New("launcher dialer: required (--kubelet-root)")
	case c.PollInterval <= 0:
		return fmt.Errorf("--launcher-poll-interval: must be positive, got %s", c.PollInterval)
	case c.HeartbeatInterval <= 0 || c.HeartbeatInterval > heartbeatv1.VouchLimit/2:
		return fmt.Errorf("heartbeat interval: must be positive and at most %s (half of heartbeatv1.VouchLimit), got %s", heartbeatv1.VouchLimit/2, c.HeartbeatInterval)
	case c.PollInterval >= launcherv1.AgentSilenceLimit/4:
		return fmt.Errorf("--launcher-poll-interval: %s is too close to the launchers' self-fencing limit (%s)", c.PollInterval, launcherv1.AgentSilenceLimit)
	case c.SubresourceTLS != nil && c.APICaller == "":
		return errors.New("virt-api's identity: required with mutual TLS (every caller would be refused)")
	}
	return nil
}

// CacheOptions limits the manager's cache to this node: instances whose status.nodeName is the
// node (a field selector the CRD declares selectable) and launcher Pods whose spec.nodeName is;
// and the KubeVirt object to Podvirt's namespace.
func CacheOptions(node, namespace string) cache.Options {
	kv, kvCache := clusterconfig.CacheByObject(namespace)
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		kv:                               kvCache,
		&virtv1.VirtualMachineInstance{}: {Field: fields.OneTermEqualSelector("status.nodeName", node)},
		&corev1.Pod{}: {
			Field: fields.OneTermEqualSelector("spec.nodeName", node),
			Label: labels.SelectorFromSet(labels.Set{launcherv1.AppLabel: launcherv1.AppLabelValue}),
		},
	}}
}

// ClientOptions keeps Leases and Nodes out of the cache: the agent reads one of each, and its RBAC
// does not allow listing them cluster-wide.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&coordinationv1.Lease{}, &corev1.Node{}}}}
}

// heartbeatClient is the heartbeat's own client: its own rate limiter and connection, so
// the agent's other requests cannot hold a renewal back, and a per-request timeout of one renewal
// interval (the apiserver gives the heartbeat's requests their own priority: install/node-agent's
// FlowSchema).
func heartbeatClient(mgr ctrl.Manager, interval time.Duration) (client.Client, error) {
	cfg := rest.CopyConfig(mgr.GetConfig())
	// HTTP/1.1: a transport of its own (client-go shares one per TLS configuration, and an HTTP/2
	// connection silently dropped would hold every request on it for longer than VouchLimit); a
	// request that times out closes its connection.
	cfg.NextProtos = []string{"http/1.1"}
	cfg.Timeout = interval
	cfg.QPS, cfg.Burst, cfg.RateLimiter = 5, 10, nil
	cfg.UserAgent = rest.DefaultKubernetesUserAgent() + " heartbeat"
	c, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("heartbeat client: %w", err)
	}
	return c, nil
}

// Agent is what Setup added to the manager.
type Agent struct {
	Reconciler *Reconciler
	// MigrationTargets prepares the migration target Pods on this node.
	MigrationTargets *MigrationTargetReconciler
	Heartbeat        *Heartbeat
	Subresources     *SubresourceServer
}

// vouch is the heartbeat's vouching with its end as a boot time, when the heartbeat's clock tells
// boot times (launchers clamp to it; with another clock no end is sent).
func (a *Agent) vouch(clk clock.PassiveClock) func() (bool, time.Duration) {
	boot, ok := clk.(boottime.Clock)
	return func() (bool, time.Duration) {
		vouching, until := a.Heartbeat.Vouch()
		if !ok || until.IsZero() {
			return vouching, 0
		}
		return vouching, boot.Of(until)
	}
}

// Setup adds the reconciler, the heartbeat and (with SubresourceAddr) the subresource server to mgr,
// whose cache must be set up with CacheOptions and its client with ClientOptions.
func Setup(mgr ctrl.Manager, cfg Config) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	heartbeatClock := cfg.Clock // how long since a renewal or a confirmation decides vouching: boot time, never stepped, suspension counted
	if heartbeatClock == nil {
		heartbeatClock = boottime.Clock{}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	triggers := make(chan event.GenericEvent, 16)
	a := &Agent{
		Reconciler: &Reconciler{
			Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(ControllerName), NodeName: cfg.NodeName,
			Dial: cfg.Dial, Accel: cfg.Accel, PollInterval: cfg.PollInterval, Triggers: triggers, Clock: cfg.Clock,
			HostDisks:        &HostDisks{Dir: cfg.HostDiskDir, Reader: mgr.GetAPIReader(), Interval: hostDiskSweepInterval, Budget: cfg.HostDiskBudget},
			QemuCapabilities: &QemuCapabilities{Dir: cfg.QemuCapabilitiesDir},
			NodeCheck:        cfg.NodeCheck,
		},
		Heartbeat: &Heartbeat{
			Namespace: cfg.Namespace, NodeName: cfg.NodeName, Holder: cfg.PodName,
			Interval: cfg.HeartbeatInterval, Clock: heartbeatClock,
		},
	}
	hb, err := heartbeatClient(mgr, cfg.HeartbeatInterval)
	if err != nil {
		return nil, err
	}
	if err := clusterconfig.Watch(context.Background(), mgr.GetCache()); err != nil {
		return nil, err
	}
	if cfg.ConfigHealthzAddr != "" {
		src := &clusterconfig.Source{Reader: mgr.GetClient(), Namespace: cfg.Namespace, Base: clusterconfig.Defaults()}
		if err := mgr.Add(&clusterconfig.HealthzServer{Addr: cfg.ConfigHealthzAddr, Source: src}); err != nil {
			return nil, fmt.Errorf("add the configuration healthz server: %w", err)
		}
	}
	a.Heartbeat.Client = hb
	a.Reconciler.Vouch = a.vouch(heartbeatClock)
	// The proxies log through slog (their package needs no controller-runtime); the bridge sends it
	// to the manager's logger, so the agent writes every line in one format.
	a.Reconciler.Migrations = &Migrations{PeerTLS: cfg.PeerTLS, Log: slog.New(logr.ToSlogHandler(mgr.GetLogger().WithName("migration-proxy")))}
	if err := a.Reconciler.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up instance controller: %w", err)
	}
	if err := mgr.Add(a.Reconciler.Migrations); err != nil {
		return nil, fmt.Errorf("add migration proxies: %w", err)
	}
	if cfg.SubresourceAddr != "" || cfg.SubresourceListener != nil {
		// Only an agent that serves the streams can be a migration target.
		address := cfg.SubresourceAddr
		if cfg.SubresourceListener != nil {
			address = cfg.SubresourceListener.Addr().String()
		}
		a.MigrationTargets = &MigrationTargetReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder(ControllerName), NodeName: cfg.NodeName,
			Address: address, Dial: cfg.Dial, Accel: cfg.Accel, PollInterval: cfg.PollInterval, Clock: cfg.Clock,
			NodeCheck: cfg.NodeCheck, Vouch: a.Reconciler.Vouch,
		}
		if err := a.MigrationTargets.SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("set up migration target controller: %w", err)
		}
	}
	if cfg.HostDiskDir != "" {
		if err := mgr.Add(a.Reconciler.HostDisks); err != nil {
			return nil, fmt.Errorf("add hostDisk sweeper: %w", err)
		}
	}
	if cfg.SubresourceAddr != "" || cfg.SubresourceListener != nil {
		if host, _, err := net.SplitHostPort(a.MigrationTargets.Address); err == nil && host != "" && !net.ParseIP(host).IsUnspecified() {
			a.Heartbeat.Address = a.MigrationTargets.Address
		} else {
			mgr.GetLogger().Info("The subresource address names no host: peers cannot ask this agent whether it lost the control plane too", "address", a.MigrationTargets.Address)
		}
		if cfg.PeerTLS != nil {
			a.Heartbeat.Ask = PeerAsker(cfg.PeerTLS)
		}
	}
	if err := mgr.Add(a.Heartbeat); err != nil {
		return nil, fmt.Errorf("add heartbeat: %w", err)
	}
	if cfg.SubresourceAddr != "" || cfg.SubresourceListener != nil {
		a.Subresources = &SubresourceServer{
			Addr: cfg.SubresourceAddr, Listener: cfg.SubresourceListener, Reader: mgr.GetClient(), APIReader: mgr.GetAPIReader(), NodeName: cfg.NodeName, Dial: cfg.Dial, Triggers: triggers,
			TLSConfig: cfg.SubresourceTLS, APICaller: cfg.APICaller, Vouch: a.Reconciler.Vouch,
			AnswerPeer: a.Heartbeat.AnswerPeer,
		}
		if err := mgr.Add(a.Subresources); err != nil {
			return nil, fmt.Errorf("add subresource server: %w", err)
		}
	}
	return a, nil
}
