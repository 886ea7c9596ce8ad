package nodeagent_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/testenv"
	"github.com/podvirt/podvirt/nodeagent"
	"github.com/podvirt/podvirt/nodeagent/accel"
	"github.com/podvirt/podvirt/nodeagent/launchertest"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	os.Exit(testenv.Run(m, &env))
}

const wait = 30 * time.Second

// eventually waits for cond to hold, failing the test with msg after the timeout.
func eventually(t testing.TB, msg string, cond func() bool) {
	t.Helper()
	require.Eventuallyf(t, cond, wait, 20*time.Millisecond, "timed out waiting: %s", msg)
}

// node is one node as the agent sees it: a kubelet root directory (where launchers' private dirs
// are) and the agent's settings.
type node struct {
	name        string
	ns          string // the agent's namespace (heartbeat lease)
	kubeletRoot string
	// qemuCapsDir holds testQemuCapabilities, as the probe container leaves them.
	qemuCapsDir string
	accel       accel.Decision
	// holdSyncs: the launchers of guests placed from now on hold their syncs (guest.releaseSyncs).
	holdSyncs bool
}

func newNode(t *testing.T, ns string) *node {
	caps := t.TempDir()
	for name, data := range testQemuCapabilities {
		require.NoError(t, os.WriteFile(filepath.Join(caps, name), data, 0o644))
	}
	return &node{
		name:        "node-" + ns,
		ns:          ns,
		kubeletRoot: filepath.Join(t.TempDir(), "var", "lib", "kubelet"),
		qemuCapsDir: caps,
		accel:       accel.Decide(false, accel.Result{Why: "no vmx or svm flag (test node)"}),
	}
}

// agent is one running node agent.
type agent struct {
	*nodeagent.Agent
	addr string
	stop func()
}

// start runs the shipped agent (nodeagent.Setup on a manager with the shipped cache and client
// options) until the test ends or stop is called.
func (n *node) start(t *testing.T) *agent {
	t.Helper()
	return n.startAs(t, env.Config)
}

// startAs runs the agent with the given credentials.
func (n *node) startAs(t *testing.T, cfg *rest.Config) *agent {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 env.Scheme,
		Cache:                  nodeagent.CacheOptions(n.name, n.ns),
		Client:                 nodeagent.ClientOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	a, err := nodeagent.Setup(mgr, nodeagent.Config{
		NodeName: n.name, PodName: "virt-handler-test", Namespace: n.ns, Accel: n.accel,
		Dial: nodeagent.KubeletDialer(n.kubeletRoot), PollInterval: 100 * time.Millisecond,
		HeartbeatInterval: 200 * time.Millisecond, SubresourceListener: ln, QemuCapabilitiesDir: n.qemuCapsDir,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		require.NoError(t, <-done)
	}
	t.Cleanup(stop)
	return &agent{Agent: a, addr: ln.Addr().String(), stop: stop}
}

// guest is one instance as the VMI controller leaves it at Scheduled, with its launcher Pod (as the
// kubelet reports it running) and a launcher double serving protocol v1 in the Pod's private dir.
type guest struct {
	vmi      *virtv1.VirtualMachineInstance
	pod      *corev1.Pod
	launcher *launchertest.Launcher
	// releaseSyncs lets the launcher's held syncs go on (node.holdSyncs).
	releaseSyncs func()
}

func vmiSpec() virtv1.VirtualMachineInstanceSpec {
	return virtv1.VirtualMachineInstanceSpec{
		Domain: virtv1.DomainSpec{
			Resources: virtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64M")}},
			Devices: virtv1.Devices{
				Disks:      []virtv1.Disk{{Name: "root", Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}}},
				Interfaces: []virtv1.Interface{{Name: "default", Masquerade: &virtv1.InterfaceMasquerade{}}},
			},
		},
		Volumes:  []virtv1.Volume{{Name: "root", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "example/disk:1"}}}},
		Networks: []virtv1.Network{{Name: "default", NetworkSource: virtv1.NetworkSource{Pod: &virtv1.PodNetwork{}}}},
	}
}

// scheduleGuest plays the VMI controller and the kubelet up to phase Scheduled on n. mutate adjusts
// the instance before it is created.
func (n *node) scheduleGuest(t *testing.T, ns, name string, mutate func(*virtv1.VirtualMachineInstance)) *guest {
	t.Helper()
	return n.placeGuest(t, ns, name, virtv1.Scheduled, mutate)
}

// placeGuest is scheduleGuest with the phase the VMI controller wrote (Scheduling: the Pod is bound
// to the node but the kubelet has not reported it running yet).
func (n *node) placeGuest(t *testing.T, ns, name string, phase virtv1.VirtualMachineInstancePhase, mutate func(*virtv1.VirtualMachineInstance)) *guest {
	t.Helper()
	ctx := context.Background()
	c := env.Client
	vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: vmiSpec()}
	if mutate != nil {
		mutate(vmi)
	}
	require.NoError(t, c.Create(ctx, vmi))

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: "virt-launcher-" + name,
			Labels:          map[string]string{launcherv1.AppLabel: launcherv1.AppLabelValue, launcherv1.DomainLabel: name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vmi, virtv1.SchemeGroupVersion.WithKind("VirtualMachineInstance"))},
		},
		Spec: corev1.PodSpec{
			NodeName:   n.name,
			Containers: []corev1.Container{{Name: launcherv1.ComputeContainer, Image: "example/virt-launcher:test"}},
		},
	}
	require.NoError(t, c.Create(ctx, pod))
	now := metav1.Now()
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: "10.244.0.9", PodIPs: []corev1.PodIP{{IP: "10.244.0.9"}}, StartTime: &now,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
	}
	require.NoError(t, c.Status().Update(ctx, pod))

	l, err := launchertest.Start(launcherv1.HostPrivateDir(n.kubeletRoot, string(pod.UID)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	release := func() {}
	if n.holdSyncs {
		release = l.HoldSyncs()
		t.Cleanup(release)
	}

	patch := client.MergeFrom(vmi.DeepCopy())
	vmi.Status.Phase, vmi.Status.NodeName, vmi.Status.LauncherPod = phase, n.name, pod.Name
	vmi.Status.PhaseTransitionTimestamps = []virtv1.VirtualMachineInstancePhaseTransitionTimestamp{{Phase: phase, PhaseTransitionTimestamp: now}}
	require.NoError(t, c.Status().Patch(ctx, vmi, patch))
	return &guest{vmi: vmi, pod: pod, launcher: l, releaseSyncs: release}
}

// get reads the instance fresh from the apiserver.
func (g *guest) get(t testing.TB) *virtv1.VirtualMachineInstance {
	t.Helper()
	vmi := &virtv1.VirtualMachineInstance{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(g.vmi), vmi))
	return vmi
}

// waitPhase waits for the instance's phase and returns the instance as it was then.
func (g *guest) waitPhase(t testing.TB, phase virtv1.VirtualMachineInstancePhase) *virtv1.VirtualMachineInstance {
	t.Helper()
	var vmi *virtv1.VirtualMachineInstance
	eventually(t, "phase "+string(phase), func() bool {
		vmi = g.get(t)
		return vmi.Status.Phase == phase
	})
	return vmi
}

// events are the reasons of the Events recorded on the instance.
func (g *guest) events(t testing.TB) map[string]eventsv1.Event {
	t.Helper()
	list := &eventsv1.EventList{}
	require.NoError(t, env.Client.List(context.Background(), list, client.InNamespace(g.vmi.Namespace)))
	out := map[string]eventsv1.Event{}
	for _, e := range list.Items {
		if e.Regarding.Kind == "VirtualMachineInstance" && e.Regarding.Name == g.vmi.Name {
			out[e.Reason] = e
		}
	}
	return out
}

func (g *guest) waitEvent(t testing.TB, reason string) eventsv1.Event {
	t.Helper()
	var e eventsv1.Event
	eventually(t, "event "+reason, func() bool {
		var ok bool
		e, ok = g.events(t)[reason]
		return ok
	})
	return e
}

// testQemuCapabilities stand in for the node's probed qemu capabilities, which the syncs of
// emulated guests carry.
var testQemuCapabilities = map[string][]byte{"926803a9278e445ec919c2b6cbd8c1c449c75b26dcb1686b774314180376c725.xml": []byte("<qemuCaps/>")}
