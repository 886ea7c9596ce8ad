package nodeagent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/testenv"
	"github.com/podvirt/podvirt/nodeagent"
	"github.com/podvirt/podvirt/nodeagent/accel"
)

func condition(vmi *virtv1.VirtualMachineInstance, typ string) *metav1.Condition {
	return meta.FindStatusCondition(vmi.Status.Conditions, typ)
}

func TestScheduledToRunningWithConditionsAndInterfaces(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	n := newNode(t, ns)
	n.start(t)
	g := n.scheduleGuest(t, ns, "vm1", nil)

	vmi := g.waitPhase(t, virtv1.Running)
	syncs := g.launcher.Syncs()
	require.Len(t, syncs, 1, "one sync starts the guest")
	assert.True(t, syncs[0].Emulation, "the node has no usable KVM: the launcher is told to emulate")
	assert.Equal(t, testQemuCapabilities, syncs[0].QemuCapabilities, "the node's probed qemu capabilities go with the sync")
	var sent virtv1.VirtualMachineInstance
	require.NoError(t, json.Unmarshal(syncs[0].VMI, &sent))
	assert.Equal(t, "kubevirt.io/v1", sent.APIVersion)
	assert.Equal(t, g.vmi.UID, sent.UID, "the launcher gets the instance itself")

	ready := condition(vmi, virtv1.VirtualMachineInstanceReady)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionTrue, ready.Status)
	emu := condition(vmi, virtv1.VirtualMachineInstanceSoftwareEmulation)
	require.NotNil(t, emu)
	assert.Equal(t, metav1.ConditionTrue, emu.Status)
	assert.Equal(t, accel.ReasonKVMUnavailable, emu.Reason)
	assert.Contains(t, emu.Message, "software emulation")
	assert.Nil(t, condition(vmi, virtv1.VirtualMachineInstancePaused))
	assert.Equal(t, []virtv1.VirtualMachineInstanceNetworkInterface{{
		Name: "default", IP: "10.244.0.9", IPs: []string{"10.244.0.9"}, MAC: "02:00:00:00:00:01",
	}}, vmi.Status.Interfaces)
	phases := []virtv1.VirtualMachineInstancePhase{}
	for _, p := range vmi.Status.PhaseTransitionTimestamps {
		phases = append(phases, p.Phase)
	}
	assert.Equal(t, []virtv1.VirtualMachineInstancePhase{virtv1.Scheduled, virtv1.Running}, phases)
	assert.Equal(t, n.name, vmi.Status.NodeName, "the controller's fields are left alone")
	assert.Equal(t, g.pod.Name, vmi.Status.LauncherPod)

	started := g.waitEvent(t, nodeagent.EventStarted)
	assert.Equal(t, corev1.EventTypeNormal, started.Type)
	// Normal, not Warning: emulation is how this node runs guests, not a fault (KubeVirt's tools
	// fail a start on any Warning of its instance).
	emuEvent := g.waitEvent(t, nodeagent.EventSoftwareEmulation)
	assert.Equal(t, corev1.EventTypeNormal, emuEvent.Type)
	assert.Contains(t, emuEvent.Note, "slower")
}

// The guest of an instance still Scheduling on this node (its Pod bound, the kubelet starting it) is
// started at once, but nothing is written until the VMI controller's Scheduled: then Running.
func TestStartsTheGuestAheadOfScheduled(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	n := newNode(t, ns)
	n.start(t)
	g := n.placeGuest(t, ns, "early", virtv1.Scheduling, nil)
	placed := g.get(t)

	eventually(t, "synced while Scheduling", func() bool { return len(g.launcher.Syncs()) == 1 })
	assert.Never(t, func() bool { return g.get(t).ResourceVersion != placed.ResourceVersion }, 2*time.Second, 100*time.Millisecond,
		"nothing written before the controller's Scheduled")

	patch := client.MergeFrom(placed.DeepCopy())
	placed.Status.SetPhase(virtv1.Scheduled, "", metav1.Now())
	require.NoError(t, env.Client.Status().Patch(context.Background(), placed, patch))
	vmi := g.waitPhase(t, virtv1.Running)
	assert.Len(t, g.launcher.Syncs(), 1, "the guest was not started twice")
	assert.Equal(t, metav1.ConditionTrue, condition(vmi, virtv1.VirtualMachineInstanceReady).Status)
}

// A sync that takes longer than a launcher waits for its agent does not leave the launcher without
// its agent's word: the agent asks for the status meanwhile (TestKeepVouching: each request with
// its own vouch, and only while it vouches).
func TestAgentAsksThroughASlowSync(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	n := newNode(t, ns)
	n.start(t)
	n.holdSyncs = true
	g := n.scheduleGuest(t, ns, "slow", nil)
	eventually(t, "the sync held by the launcher", func() bool { return g.launcher.SyncsHeld() == 1 })
	held := len(g.launcher.Polls())
	eventually(t, "status requests while the sync is served", func() bool { return len(g.launcher.Polls()) >= held+5 })
	g.releaseSyncs()
	g.waitPhase(t, virtv1.Running)
	assert.Len(t, g.launcher.Syncs(), 1)
}

func TestStartsOnlyInstancesOfItsNode(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	here, elsewhere := newNode(t, ns), newNode(t, ns)
	elsewhere.name = "other-" + ns
	here.start(t)
	other := elsewhere.scheduleGuest(t, ns, "vm-elsewhere", nil)
	mine := here.scheduleGuest(t, ns, "vm-here", nil)

	mine.waitPhase(t, virtv1.Running)
	// The agent's cache holds only its node's instances: the other one was never synced.
	assert.Empty(t, other.launcher.Syncs())
	assert.Equal(t, virtv1.Scheduled, other.get(t).Status.Phase)
}

func TestDeletionShutsDownWithGracePeriodThenSucceeds(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	n := newNode(t, ns)
	n.start(t)
	g := n.scheduleGuest(t, ns, "vm-del", func(vmi *virtv1.VirtualMachineInstance) {
		vmi.Spec.TerminationGracePeriodSeconds = ptr.To(int64(7))
		// The VMI controller's finalizer keeps the deleted instance until its Pod is gone.
		controllerutil.AddFinalizer(vmi, virtv1.VirtualMachineControllerFinalizer)
	})
	g.waitPhase(t, virtv1.Running)
	t.Cleanup(func() { releaseFinalizer(t, g) })

	require.NoError(t, env.Client.Delete(context.Background(), g.get(t)))
	eventually(t, "an ACPI shutdown with the instance's grace period", func() bool { return len(g.launcher.Shutdowns()) > 0 })
	assert.Equal(t, []launcherv1.ShutdownRequest{{GracePeriodSeconds: 7}}, g.launcher.Shutdowns())
	ev := g.waitEvent(t, nodeagent.EventShuttingDown)
	assert.Contains(t, ev.Note, "7s")
	eventually(t, "Ready=False ShuttingDown", func() bool {
		c := condition(g.get(t), virtv1.VirtualMachineInstanceReady)
		return c != nil && c.Reason == nodeagent.ReasonShuttingDown
	})

	// The guest powers off; the launcher exits and leaves its final status.
	require.NoError(t, g.launcher.Exit(launcherv1.Status{State: launcherv1.DomainShutoff, Reason: "GuestShutdown", Message: "the guest powered off"}))
	vmi := g.waitPhase(t, virtv1.Succeeded)
	assert.Equal(t, "GuestShutdown", vmi.Status.Reason)
	assert.Len(t, g.launcher.Shutdowns(), 1, "the shutdown is asked for once (level-based: ShuttingDown is not Running)")
}

// The Pod's SIGTERM reached the launcher before the agent saw the deletion: the guest is already
// shutting down, unasked (Terminated). The agent asks anyway, so the stop counts as requested.
func TestDeletionConfirmsAShutdownTheKubeletStarted(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	n := newNode(t, ns)
	n.start(t)
	g := n.scheduleGuest(t, ns, "vm-term", func(vmi *virtv1.VirtualMachineInstance) {
		controllerutil.AddFinalizer(vmi, virtv1.VirtualMachineControllerFinalizer)
	})
	g.waitPhase(t, virtv1.Running)
	t.Cleanup(func() { releaseFinalizer(t, g) })

	g.launcher.SetState(launcherv1.DomainShuttingDown, launcherv1.ReasonTerminated, "terminated")
	require.NoError(t, env.Client.Delete(context.Background(), g.get(t)))
	eventually(t, "the shutdown is asked for", func() bool { return len(g.launcher.Shutdowns()) > 0 })
	assert.Equal(t, launcherv1.ReasonShutdownRequested, g.launcher.Status().Reason)
	assert.Never(t, func() bool { return len(g.launcher.Shutdowns()) > 1 }, time.Second, 100*time.Millisecond, "asked once")
}

func releaseFinalizer(t *testing.T, g *guest) {
	vmi := &virtv1.VirtualMachineInstance{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(g.vmi), vmi); err != nil {
		return
	}
	patch := client.MergeFrom(vmi.DeepCopy())
	controllerutil.RemoveFinalizer(vmi, virtv1.VirtualMachineControllerFinalizer)
	require.NoError(t, client.IgnoreNotFound(env.Client.Patch(context.Background(), vmi, patch)))
}

func TestLauncherReportsShutoffThenSucceeded(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	n := newNode(t, ns)
	n.start(t)
	g := n.scheduleGuest(t, ns, "vm-off", nil)
	g.waitPhase(t, virtv1.Running)

	g.launcher.SetState(launcherv1.DomainShutoff, "GuestShutdown", "the guest powered off")
	vmi := g.waitPhase(t, virtv1.Succeeded)
	assert.Equal(t, "GuestShutdown", vmi.Status.Reason)
	ready := condition(vmi, virtv1.VirtualMachineInstanceReady)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, "the guest powered off", ready.Message)
	g.waitEvent(t, nodeagent.EventStopped)
}

func TestQemuCrashFailsWithReason(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	n := newNode(t, ns)
	n.start(t)
	g := n.scheduleGuest(t, ns, "vm-crash", nil)
	g.waitPhase(t, virtv1.Running)

	// qemu dies: the launcher reports Crashed, writes its exit file and exits non-zero.
	require.NoError(t, g.launcher.Exit(launcherv1.Status{State: launcherv1.DomainCrashed, Reason: "QemuCrashed", Message: "qemu exited unexpectedly"}))
	vmi := g.waitPhase(t, virtv1.Failed)
	assert.Equal(t, "QemuCrashed", vmi.Status.Reason)
	assert.Equal(t, "qemu exited unexpectedly", condition(vmi, virtv1.VirtualMachineInstanceReady).Message)
	ev := g.waitEvent(t, nodeagent.EventFailed)
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	assert.Contains(t, ev.Note, "QemuCrashed")
}

func TestControllerPodFailedIsRefinedFromExitFile(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	n := newNode(t, ns)
	a := n.start(t)
	g := n.scheduleGuest(t, ns, "vm-refine", nil)
	g.waitPhase(t, virtv1.Running)
	a.stop() // the agent is down when qemu dies

	require.NoError(t, g.launcher.Exit(launcherv1.Status{State: launcherv1.DomainCrashed, Reason: "QemuKilled", Message: "the guest stopped without a request"}))
	// The VMI controller sees the Pod fail first and writes its generic reason.
	vmi := g.get(t)
	patch := client.MergeFromWithOptions(vmi.DeepCopy(), client.MergeFromWithOptimisticLock{})
	vmi.Status.Phase, vmi.Status.Reason = virtv1.Failed, "PodFailed"
	require.NoError(t, env.Client.Status().Patch(context.Background(), vmi, patch))

	n.start(t)
	eventually(t, "reason QemuKilled", func() bool { return g.get(t).Status.Reason == "QemuKilled" })
	assert.Equal(t, virtv1.Failed, g.get(t).Status.Phase)
}

func TestPauseAndUnpauseThroughSubresourceServer(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	n := newNode(t, ns)
	a := n.start(t)
	g := n.scheduleGuest(t, ns, "vm-pause", nil)
	g.waitPhase(t, virtv1.Running)

	url := func(name, verb string) string {
		return fmt.Sprintf("http://%s/v1/namespaces/%s/virtualmachineinstances/%s/%s", a.addr, ns, name, verb)
	}
	assert.Equal(t, http.StatusConflict, put(t, url("vm-pause", "unpause")), "unpausing a running guest is a conflict")
	assert.Equal(t, http.StatusOK, put(t, url("vm-pause", "pause")))
	eventually(t, "Paused=True", func() bool {
		return meta.IsStatusConditionTrue(g.get(t).Status.Conditions, virtv1.VirtualMachineInstancePaused)
	})
	vmi := g.get(t)
	assert.Equal(t, launcherv1.ReasonPaused, condition(vmi, virtv1.VirtualMachineInstancePaused).Reason)
	assert.Equal(t, nodeagent.ReasonGuestPaused, condition(vmi, virtv1.VirtualMachineInstanceReady).Reason)
	g.waitEvent(t, nodeagent.EventPaused)

	assert.Equal(t, http.StatusConflict, put(t, url("vm-pause", "pause")), "pausing a paused guest is a conflict")
	assert.Equal(t, http.StatusConflict, put(t, url("vm-pause", "softreboot")), "a paused guest cannot be rebooted")
	assert.Equal(t, http.StatusConflict, put(t, url("vm-pause", "reset")), "a paused guest cannot be reset")
	assert.Equal(t, http.StatusNotFound, put(t, url("no-such-vm", "pause")))

	assert.Equal(t, http.StatusOK, put(t, url("vm-pause", "unpause")))
	eventually(t, "Paused condition gone, Ready again", func() bool {
		vmi := g.get(t)
		return condition(vmi, virtv1.VirtualMachineInstancePaused) == nil &&
			meta.IsStatusConditionTrue(vmi.Status.Conditions, virtv1.VirtualMachineInstanceReady)
	})
	g.waitEvent(t, nodeagent.EventUnpaused)
	assert.Equal(t, http.StatusOK, put(t, url("vm-pause", "softreboot")))
	assert.Equal(t, 1, g.launcher.Reboots(), "the reboot reached the launcher once")
	assert.Equal(t, http.StatusOK, put(t, url("vm-pause", "reset")))
	assert.Equal(t, 1, g.launcher.Resets(), "the reset reached the launcher once")
}

func put(t *testing.T, url string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

func TestRestartedAgentReadoptsWithoutSyncingAgain(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	n := newNode(t, ns)
	first := n.start(t)
	g := n.scheduleGuest(t, ns, "vm-restart", nil)
	before := g.waitPhase(t, virtv1.Running)
	first.stop()

	n.start(t)
	// The guest changes while the new agent runs: its status follows, so the agent is at work.
	g.launcher.SetState(launcherv1.DomainPaused, launcherv1.ReasonPaused, "")
	eventually(t, "Paused=True after the restart", func() bool {
		return meta.IsStatusConditionTrue(g.get(t).Status.Conditions, virtv1.VirtualMachineInstancePaused)
	})
	after := g.get(t)
	assert.Len(t, g.launcher.Syncs(), 1, "the running guest is re-adopted, not synced again")
	assert.Equal(t, virtv1.Running, after.Status.Phase)
	assert.Equal(t, before.Status.PhaseTransitionTimestamps, after.Status.PhaseTransitionTimestamps, "no phase was re-entered")
}

func TestHeartbeatLeaseCreatedAndRenewed(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	n := newNode(t, ns)
	nodeObj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name}}
	require.NoError(t, env.Client.Create(context.Background(), nodeObj))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), nodeObj) })
	a := n.start(t)

	key := client.ObjectKey{Namespace: ns, Name: heartbeatv1.LeaseName(n.name)}
	lease := &coordinationv1.Lease{}
	eventually(t, "the lease exists", func() bool { return env.Client.Get(context.Background(), key, lease) == nil })
	assert.Equal(t, "virt-handler-test", ptr.Deref(lease.Spec.HolderIdentity, ""))
	assert.Equal(t, int32(40), ptr.Deref(lease.Spec.LeaseDurationSeconds, 0))
	require.Len(t, lease.OwnerReferences, 1)
	assert.Equal(t, nodeObj.UID, lease.OwnerReferences[0].UID, "the Node owns its lease")
	first := lease.Spec.RenewTime.Time
	eventually(t, "the lease is renewed", func() bool {
		l := &coordinationv1.Lease{}
		return env.Client.Get(context.Background(), key, l) == nil && l.Spec.RenewTime.After(first)
	})
	assert.NoError(t, a.Heartbeat.Check(nil), "readiness: the heartbeat is fresh")
	assert.NotEmpty(t, heartbeatv1.Renewal(lease), "the lease names its renewal")
}
