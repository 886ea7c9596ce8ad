package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/controllers/podtemplate"
	"github.com/podvirt/podvirt/internal/testenv"
)

// The kubelet does not run in the integration environment: the tests play its part by binding
// launcher Pods and writing their status, and the node agent's part by writing instance phases.

func vmStatus(t *testing.T, ns, name string) virtv1.VirtualMachineStatus {
	t.Helper()
	vm, ok := get(t, &virtv1.VirtualMachine{}, ns, name)
	if !ok {
		return virtv1.VirtualMachineStatus{}
	}
	return vm.Status
}

func instance(t *testing.T, ns, name string) *virtv1.VirtualMachineInstance {
	t.Helper()
	v, ok := get(t, &virtv1.VirtualMachineInstance{}, ns, name)
	if !ok {
		return nil
	}
	return v
}

// setInstancePhase plays the node agent: it writes the instance's phase (and Ready when Running).
func setInstancePhase(t *testing.T, ns, name string, phase virtv1.VirtualMachineInstancePhase) {
	t.Helper()
	require.Eventually(t, func() bool {
		v := instance(t, ns, name)
		if v == nil {
			return false
		}
		patch := client.MergeFromWithOptions(v.DeepCopy(), client.MergeFromWithOptimisticLock{})
		v.Status.Phase = phase
		v.Status.PhaseTransitionTimestamps = append(v.Status.PhaseTransitionTimestamps, virtv1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: phase, PhaseTransitionTimestamp: metav1.Now()})
		ready := metav1.ConditionFalse
		if phase == virtv1.Running {
			ready = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&v.Status.Conditions, metav1.Condition{Type: virtv1.VirtualMachineInstanceReady, Status: ready, Reason: "Test" + string(phase)})
		return env.Client.Status().Patch(context.Background(), v, patch) == nil
	}, wait, 50*time.Millisecond)
}

func launcherPod(t testing.TB, v *virtv1.VirtualMachineInstance) *corev1.Pod {
	t.Helper()
	p, ok := get(t, &corev1.Pod{}, v.Namespace, podtemplate.PodName(v))
	if !ok {
		return nil
	}
	return p
}

// runPod plays the scheduler and the kubelet: it binds the launcher Pod to a node and reports it running.
func runPod(t testing.TB, v *virtv1.VirtualMachineInstance, node string) {
	t.Helper()
	ctx := context.Background()
	var pod *corev1.Pod
	eventually(t, "launcher pod exists", func() bool { pod = launcherPod(t, v); return pod != nil })
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	require.NoError(t, env.Client.SubResource("binding").Create(ctx, pod, binding))
	pod = launcherPod(t, v)
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	require.NoError(t, env.Client.Status().Update(ctx, pod))
}

// kubeletDeletes plays the kubelet confirming a bound Pod's graceful deletion.
func kubeletDeletes(t *testing.T, ns string) {
	t.Helper()
	var pods corev1.PodList
	require.NoError(t, env.Client.List(context.Background(), &pods, client.InNamespace(ns)))
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp != nil {
			_ = env.Client.Delete(context.Background(), &pods.Items[i], client.GracePeriodSeconds(0))
		}
	}
}

func condition(conds []metav1.Condition, t string) metav1.Condition {
	if c := meta.FindStatusCondition(conds, t); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func TestAlwaysVMStartsAndReportsEachStep(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	startControllers(t, ns)
	ctx := context.Background()

	vm := newVM(ns, "always", virtv1.RunStrategyAlways)
	require.NoError(t, e.Client.Create(ctx, vm))

	var v *virtv1.VirtualMachineInstance
	eventually(t, "instance created", func() bool { v = instance(t, ns, "always"); return v != nil })
	ref := metav1.GetControllerOf(v)
	require.NotNil(t, ref)
	assert.Equal(t, vm.UID, ref.UID)
	assert.True(t, *ref.BlockOwnerDeletion)
	assert.Contains(t, v.Finalizers, virtv1.VirtualMachineControllerFinalizer)
	assert.Equal(t, "always", v.Labels["app"])
	require.NotNil(t, v.Spec.Domain.Firmware)
	firmwareUUID := v.Spec.Domain.Firmware.UUID
	assert.NotEmpty(t, firmwareUUID)

	eventually(t, "VM Starting", func() bool {
		st := vmStatus(t, ns, "always")
		return st.PrintableStatus == virtv1.VirtualMachineStatusStarting && st.Created && !st.Ready
	})
	eventually(t, "instance Scheduling", func() bool { return instance(t, ns, "always").Status.Phase == virtv1.Scheduling })
	pod := launcherPod(t, v)
	require.NotNil(t, pod)
	assert.Equal(t, "virt-launcher", pod.Labels["kubevirt.io"])
	assert.Equal(t, "always", pod.Labels["kubevirt.io/domain"])

	runPod(t, v, "node-a")
	eventually(t, "instance Scheduled on node-a", func() bool {
		v := instance(t, ns, "always")
		return v.Status.Phase == virtv1.Scheduled && v.Status.NodeName == "node-a" && v.Status.LauncherPod == pod.Name
	})
	setInstancePhase(t, ns, "always", virtv1.Running)
	eventually(t, "VM Running and ready", func() bool {
		st := vmStatus(t, ns, "always")
		return st.PrintableStatus == virtv1.VirtualMachineStatusRunning && st.Ready &&
			condition(st.Conditions, virtv1.VirtualMachineReady).Status == metav1.ConditionTrue &&
			condition(st.Conditions, virtv1.VirtualMachineStopped).Status == metav1.ConditionFalse
	})

	// The guest powers off: Always replaces the instance; the firmware UUID stays.
	old := instance(t, ns, "always")
	setInstancePhase(t, ns, "always", virtv1.Succeeded)
	kubeletDeletes(t, ns)
	eventually(t, "replacement instance", func() bool {
		kubeletDeletes(t, ns)
		v := instance(t, ns, "always")
		return v != nil && v.UID != old.UID
	})
	assert.Equal(t, firmwareUUID, instance(t, ns, "always").Spec.Domain.Firmware.UUID)
}

func TestHaltedVMSaysWhyItIsStopped(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	startControllers(t, ns)
	require.NoError(t, e.Client.Create(context.Background(), newVM(ns, "halted", virtv1.RunStrategyHalted)))

	eventually(t, "Stopped condition", func() bool {
		st := vmStatus(t, ns, "halted")
		c := condition(st.Conditions, virtv1.VirtualMachineStopped)
		return st.PrintableStatus == virtv1.VirtualMachineStatusStopped && c.Status == metav1.ConditionTrue && c.Reason == "Halted" &&
			st.RunStrategy == virtv1.RunStrategyHalted
	})
	assert.Nil(t, instance(t, ns, "halted"))
}

func patchRunStrategy(t *testing.T, ns, name string, s virtv1.VirtualMachineRunStrategy) {
	t.Helper()
	vm, _ := get(t, &virtv1.VirtualMachine{}, ns, name)
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.RunStrategy = &s
	require.NoError(t, env.Client.Patch(context.Background(), vm, patch))
}

func appendRequests(t *testing.T, ns, name string, reqs ...virtv1.VirtualMachineStateChangeRequest) {
	t.Helper()
	require.Eventually(t, func() bool {
		vm, _ := get(t, &virtv1.VirtualMachine{}, ns, name)
		patch := client.MergeFromWithOptions(vm.DeepCopy(), client.MergeFromWithOptimisticLock{})
		vm.Status.StateChangeRequests = append(vm.Status.StateChangeRequests, reqs...)
		return env.Client.Status().Patch(context.Background(), vm, patch) == nil
	}, wait, 50*time.Millisecond)
}

func TestRunStrategyTransitions(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	startControllers(t, ns)
	ctx := context.Background()
	require.NoError(t, e.Client.Create(ctx, newVM(ns, "vm", virtv1.RunStrategyHalted)))

	// Halted → Always starts; Always → Halted stops.
	patchRunStrategy(t, ns, "vm", virtv1.RunStrategyAlways)
	eventually(t, "started", func() bool { return instance(t, ns, "vm") != nil })
	patchRunStrategy(t, ns, "vm", virtv1.RunStrategyHalted)
	eventually(t, "stopped", func() bool { return instance(t, ns, "vm") == nil })
	eventually(t, "Stopped", func() bool { return vmStatus(t, ns, "vm").PrintableStatus == virtv1.VirtualMachineStatusStopped })

	// RerunOnFailure: starts; a failure is rerun; a guest shutdown is not.
	patchRunStrategy(t, ns, "vm", virtv1.RunStrategyRerunOnFailure)
	var first *virtv1.VirtualMachineInstance
	eventually(t, "rerun-on-failure starts", func() bool { first = instance(t, ns, "vm"); return first != nil })
	setInstancePhase(t, ns, "vm", virtv1.Running)
	setInstancePhase(t, ns, "vm", virtv1.Failed)
	eventually(t, "failure rerun", func() bool { v := instance(t, ns, "vm"); return v != nil && v.UID != first.UID })
	second := instance(t, ns, "vm")
	setInstancePhase(t, ns, "vm", virtv1.Running)
	setInstancePhase(t, ns, "vm", virtv1.Succeeded)
	eventually(t, "shutdown stays off", func() bool {
		c := condition(vmStatus(t, ns, "vm").Conditions, virtv1.VirtualMachineStopped)
		return c.Status == metav1.ConditionTrue && c.Reason == "GuestShutdown"
	})
	assert.Equal(t, second.UID, instance(t, ns, "vm").UID, "a Succeeded instance is not rerun")

	// Manual: nothing happens without requests; Start then Stop requests are acted on and removed.
	patchRunStrategy(t, ns, "vm", virtv1.RunStrategyHalted)
	eventually(t, "halted again", func() bool { return instance(t, ns, "vm") == nil })
	patchRunStrategy(t, ns, "vm", virtv1.RunStrategyManual)
	eventually(t, "manual applied", func() bool {
		c := condition(vmStatus(t, ns, "vm").Conditions, virtv1.VirtualMachineStopped)
		return vmStatus(t, ns, "vm").RunStrategy == virtv1.RunStrategyManual && c.Reason == "Manual"
	})
	assert.Nil(t, instance(t, ns, "vm"))
	appendRequests(t, ns, "vm", virtv1.VirtualMachineStateChangeRequest{Action: virtv1.StartRequest})
	var manual *virtv1.VirtualMachineInstance
	eventually(t, "start request done", func() bool {
		manual = instance(t, ns, "vm")
		return manual != nil && len(vmStatus(t, ns, "vm").StateChangeRequests) == 0
	})
	uid := manual.UID
	appendRequests(t, ns, "vm", virtv1.VirtualMachineStateChangeRequest{Action: virtv1.StopRequest, UID: &uid})
	eventually(t, "stop request done", func() bool {
		return instance(t, ns, "vm") == nil && len(vmStatus(t, ns, "vm").StateChangeRequests) == 0
	})

	// Once: runs once; after the instance ends it is not recreated.
	patchRunStrategy(t, ns, "vm", virtv1.RunStrategyOnce)
	var once *virtv1.VirtualMachineInstance
	eventually(t, "once starts", func() bool { once = instance(t, ns, "vm"); return once != nil })
	setInstancePhase(t, ns, "vm", virtv1.Running)
	setInstancePhase(t, ns, "vm", virtv1.Failed)
	eventually(t, "once not rerun", func() bool {
		return condition(vmStatus(t, ns, "vm").Conditions, virtv1.VirtualMachineStopped).Reason == "RanOnce"
	})
	assert.Equal(t, once.UID, instance(t, ns, "vm").UID)
}

func TestRestartThroughStateChangeRequests(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	startControllers(t, ns)
	require.NoError(t, e.Client.Create(context.Background(), newVM(ns, "vm", virtv1.RunStrategyAlways)))
	var first *virtv1.VirtualMachineInstance
	eventually(t, "started", func() bool { first = instance(t, ns, "vm"); return first != nil })
	uid := first.UID
	appendRequests(t, ns, "vm",
		virtv1.VirtualMachineStateChangeRequest{Action: virtv1.StopRequest, UID: &uid},
		virtv1.VirtualMachineStateChangeRequest{Action: virtv1.StartRequest})
	eventually(t, "restarted with both requests done", func() bool {
		v := instance(t, ns, "vm")
		return v != nil && v.UID != uid && len(vmStatus(t, ns, "vm").StateChangeRequests) == 0
	})
}

func TestCrashLoopBackoff(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	startControllers(t, ns)
	require.NoError(t, e.Client.Create(context.Background(), newVM(ns, "crashy", virtv1.RunStrategyAlways)))
	var first *virtv1.VirtualMachineInstance
	eventually(t, "started", func() bool { first = instance(t, ns, "crashy"); return first != nil })
	setInstancePhase(t, ns, "crashy", virtv1.Failed) // failed before ever running
	eventually(t, "backing off", func() bool {
		st := vmStatus(t, ns, "crashy")
		return st.StartFailure != nil && st.StartFailure.ConsecutiveFailCount == 1 && st.StartFailure.LastFailedVMIUID == first.UID &&
			st.PrintableStatus == virtv1.VirtualMachineStatusCrashLoopBackOff
	})
	st := vmStatus(t, ns, "crashy")
	delay := st.StartFailure.RetryAfterTimestamp.Sub(time.Now())
	assert.Greater(t, delay, 5*time.Second)
	assert.LessOrEqual(t, delay, 12*time.Second)
	assert.Equal(t, first.UID, instance(t, ns, "crashy").UID, "no new instance during the backoff")
}

func TestOrphanDeleteThenAdoption(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	startControllers(t, ns)
	ctx := context.Background()
	vm := newVM(ns, "vm", virtv1.RunStrategyAlways)
	require.NoError(t, e.Client.Create(ctx, vm))
	var v *virtv1.VirtualMachineInstance
	eventually(t, "started", func() bool { v = instance(t, ns, "vm"); return v != nil })

	require.NoError(t, e.Client.Delete(ctx, vm, client.PropagationPolicy(metav1.DeletePropagationOrphan)))
	eventually(t, "VM gone, instance orphaned", func() bool {
		_, vmExists := get(t, &virtv1.VirtualMachine{}, ns, "vm")
		cur := instance(t, ns, "vm")
		return !vmExists && cur != nil && cur.UID == v.UID && metav1.GetControllerOf(cur) == nil
	})

	again := newVM(ns, "vm", virtv1.RunStrategyAlways)
	require.NoError(t, e.Client.Create(ctx, again))
	eventually(t, "adopted", func() bool {
		cur := instance(t, ns, "vm")
		ref := metav1.GetControllerOf(cur)
		return cur.UID == v.UID && ref != nil && ref.UID == again.UID
	})
}

func TestCascadeDelete(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	startControllers(t, ns)
	ctx := context.Background()
	vm := newVM(ns, "vm", virtv1.RunStrategyAlways)
	require.NoError(t, e.Client.Create(ctx, vm))
	var v *virtv1.VirtualMachineInstance
	eventually(t, "started", func() bool { v = instance(t, ns, "vm"); return v != nil })
	eventually(t, "pod created", func() bool { return launcherPod(t, v) != nil })

	require.NoError(t, e.Client.Delete(ctx, vm))
	eventually(t, "VM, instance and pod gone", func() bool {
		_, vmExists := get(t, &virtv1.VirtualMachine{}, ns, "vm")
		return !vmExists && instance(t, ns, "vm") == nil && launcherPod(t, v) == nil
	})
}

func TestRestartRequiredWhenTemplateChanges(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	startControllers(t, ns)
	ctx := context.Background()
	require.NoError(t, e.Client.Create(ctx, newVM(ns, "vm", virtv1.RunStrategyAlways)))
	var first *virtv1.VirtualMachineInstance
	eventually(t, "started", func() bool { first = instance(t, ns, "vm"); return first != nil })
	eventually(t, "no RestartRequired", func() bool {
		st := vmStatus(t, ns, "vm")
		return st.Created && meta.FindStatusCondition(st.Conditions, virtv1.VirtualMachineRestartRequired) == nil
	})

	vm, _ := get(t, &virtv1.VirtualMachine{}, ns, "vm")
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.Template.Spec.Domain.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("128M")
	require.NoError(t, e.Client.Patch(ctx, vm, patch))
	eventually(t, "RestartRequired", func() bool {
		return condition(vmStatus(t, ns, "vm").Conditions, virtv1.VirtualMachineRestartRequired).Status == metav1.ConditionTrue
	})
	cur := instance(t, ns, "vm")
	assert.Equal(t, first.UID, cur.UID, "OnDelete: the running instance is not replaced")
	assert.Equal(t, "64M", cur.Spec.Domain.Resources.Requests.Memory().String())
}

func TestControllerRestartMidStartCreatesNoDuplicates(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	ctx := context.Background()
	stop := startControllers(t, ns)
	require.NoError(t, e.Client.Create(ctx, newVM(ns, "vm", virtv1.RunStrategyAlways)))
	var first *virtv1.VirtualMachineInstance
	eventually(t, "instance created", func() bool { first = instance(t, ns, "vm"); return first != nil })
	stop()

	startControllers(t, ns)
	eventually(t, "pod created once", func() bool { return launcherPod(t, first) != nil })
	eventually(t, "VM status settled", func() bool { return vmStatus(t, ns, "vm").PrintableStatus == virtv1.VirtualMachineStatusStarting })
	var vmis virtv1.VirtualMachineInstanceList
	require.NoError(t, e.Client.List(ctx, &vmis, client.InNamespace(ns)))
	var pods corev1.PodList
	require.NoError(t, e.Client.List(ctx, &pods, client.InNamespace(ns)))
	require.Len(t, vmis.Items, 1)
	assert.Equal(t, first.UID, vmis.Items[0].UID)
	assert.Len(t, pods.Items, 1)
}

func TestPodDeletedFailsInstanceAndAlwaysRecreates(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	startControllers(t, ns)
	ctx := context.Background()
	require.NoError(t, e.Client.Create(ctx, newVM(ns, "vm", virtv1.RunStrategyAlways)))
	var first *virtv1.VirtualMachineInstance
	eventually(t, "started", func() bool { first = instance(t, ns, "vm"); return first != nil })
	runPod(t, first, "node-a")
	eventually(t, "scheduled", func() bool { return instance(t, ns, "vm").Status.Phase == virtv1.Scheduled })

	pod := launcherPod(t, first)
	require.NoError(t, e.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)))
	eventually(t, "instance replaced after its pod was deleted", func() bool {
		kubeletDeletes(t, ns)
		v := instance(t, ns, "vm")
		return v != nil && v.UID != first.UID
	})
	var events corev1.EventList
	require.NoError(t, e.Client.List(ctx, &events, client.InNamespace(ns)))
	var reasons []string
	for _, ev := range events.Items {
		reasons = append(reasons, ev.Reason)
	}
	assert.Contains(t, reasons, "SuccessfulCreate")
	assert.Contains(t, reasons, "Failed")
}

func TestInstanceWithoutMemoryFailsNamingTheField(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	startControllers(t, ns)
	vm := newVM(ns, "nomem", virtv1.RunStrategyManual)
	v := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nomem"}, Spec: vm.Spec.Template.Spec}
	v.Spec.Domain.Resources.Requests = nil
	require.NoError(t, e.Client.Create(context.Background(), v))
	eventually(t, "failed InvalidSpec", func() bool {
		cur := instance(t, ns, "nomem")
		c := condition(cur.Status.Conditions, virtv1.VirtualMachineInstanceReady)
		return cur.Status.Phase == virtv1.Failed && cur.Status.Reason == "InvalidSpec" &&
			strings.Contains(c.Message, "spec.domain.resources.requests.memory")
	})
	assert.Nil(t, launcherPod(t, instance(t, ns, "nomem")))
}

func TestPodOfAFinishedInstanceIsDeleted(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	startControllers(t, ns)
	vm := newVM(ns, "bare", virtv1.RunStrategyManual)
	v := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bare"}, Spec: vm.Spec.Template.Spec}
	require.NoError(t, e.Client.Create(context.Background(), v))
	runPod(t, v, "node-a")
	eventually(t, "scheduled", func() bool { return instance(t, ns, "bare").Status.Phase == virtv1.Scheduled })
	setInstancePhase(t, ns, "bare", virtv1.Failed) // the node agent could not start the guest
	eventually(t, "launcher pod deleted", func() bool {
		p := launcherPod(t, v)
		return p == nil || p.DeletionTimestamp != nil
	})
}
