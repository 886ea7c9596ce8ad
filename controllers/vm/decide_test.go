package vm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

type vmOpt func(*virtv1.VirtualMachine)

func withStrategy(s virtv1.VirtualMachineRunStrategy) vmOpt {
	return func(vm *virtv1.VirtualMachine) { vm.Spec.RunStrategy = ptr.To(s) }
}
func applied(s virtv1.VirtualMachineRunStrategy) vmOpt {
	return func(vm *virtv1.VirtualMachine) { vm.Status.RunStrategy = s }
}
func requests(r ...virtv1.VirtualMachineStateChangeRequest) vmOpt {
	return func(vm *virtv1.VirtualMachine) { vm.Status.StateChangeRequests = r }
}
func backingOff(d time.Duration) vmOpt {
	return func(vm *virtv1.VirtualMachine) {
		t := metav1.NewTime(now.Add(d))
		vm.Status.StartFailure = &virtv1.VirtualMachineStartFailure{ConsecutiveFailCount: 1, RetryAfterTimestamp: &t}
	}
}

func mkVM(opts ...vmOpt) *virtv1.VirtualMachine {
	vm := &virtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns", UID: "vm-uid"}}
	for _, o := range opts {
		o(vm)
	}
	return vm
}

func TestRunStrategyMapping(t *testing.T) {
	assert.Equal(t, virtv1.RunStrategyHalted, mkVM().Spec.EffectiveRunStrategy())
	vm := mkVM()
	vm.Spec.Running = ptr.To(true)
	assert.Equal(t, virtv1.RunStrategyAlways, vm.Spec.EffectiveRunStrategy())
	vm.Spec.Running = ptr.To(false)
	assert.Equal(t, virtv1.RunStrategyHalted, vm.Spec.EffectiveRunStrategy())
	assert.Equal(t, virtv1.RunStrategyOnce, mkVM(withStrategy(virtv1.RunStrategyOnce)).Spec.EffectiveRunStrategy())
}

func TestDecide(t *testing.T) {
	none := observed{}
	running := observed{exists: true, uid: "a", phase: virtv1.Running}
	failed := observed{exists: true, uid: "a", phase: virtv1.Failed}
	succeeded := observed{exists: true, uid: "a", phase: virtv1.Succeeded}
	deleting := observed{exists: true, uid: "a", phase: virtv1.Running, deleting: true}
	stopA := virtv1.VirtualMachineStateChangeRequest{Action: virtv1.StopRequest, UID: ptr.To(types.UID("a"))}
	stopB := virtv1.VirtualMachineStateChangeRequest{Action: virtv1.StopRequest, UID: ptr.To(types.UID("b"))}
	start := virtv1.VirtualMachineStateChangeRequest{Action: virtv1.StartRequest}

	cases := []struct {
		name string
		vm   *virtv1.VirtualMachine
		cur  observed
		want decision
	}{
		{"always creates", mkVM(withStrategy(virtv1.RunStrategyAlways)), none, decision{action: actCreate}},
		{"always keeps running", mkVM(withStrategy(virtv1.RunStrategyAlways)), running, decision{}},
		{"always replaces failed", mkVM(withStrategy(virtv1.RunStrategyAlways)), failed, decision{action: actDelete}},
		{"always replaces succeeded", mkVM(withStrategy(virtv1.RunStrategyAlways)), succeeded, decision{action: actDelete}},
		{"always fences while deleting", mkVM(withStrategy(virtv1.RunStrategyAlways)), deleting, decision{}},
		{"always backs off", mkVM(withStrategy(virtv1.RunStrategyAlways), backingOff(20*time.Second)), none,
			decision{retryAfter: 20 * time.Second, stoppedReason: "CrashLoopBackOff"}},
		{"always after backoff", mkVM(withStrategy(virtv1.RunStrategyAlways), backingOff(-time.Second)), none, decision{action: actCreate}},
		{"halted deletes", mkVM(withStrategy(virtv1.RunStrategyHalted)), running, decision{action: actDelete, stoppedReason: "Halted"}},
		{"halted idle", mkVM(withStrategy(virtv1.RunStrategyHalted)), none, decision{stoppedReason: "Halted"}},
		{"halted drops requests", mkVM(withStrategy(virtv1.RunStrategyHalted), requests(start)), none, decision{stoppedReason: "Halted", dropRequest: true}},
		{"rerun starts when newly set", mkVM(withStrategy(virtv1.RunStrategyRerunOnFailure)), none, decision{action: actCreate}},
		{"rerun stays off after stop", mkVM(withStrategy(virtv1.RunStrategyRerunOnFailure), applied(virtv1.RunStrategyRerunOnFailure)), none, decision{stoppedReason: "Stopped"}},
		{"rerun replaces failed", mkVM(withStrategy(virtv1.RunStrategyRerunOnFailure), applied(virtv1.RunStrategyRerunOnFailure)), failed, decision{queueStart: true}},
		{"rerun request replaces failed", mkVM(withStrategy(virtv1.RunStrategyRerunOnFailure), applied(virtv1.RunStrategyRerunOnFailure), requests(start)), failed, decision{action: actDelete}},
		{"rerun request starts when gone", mkVM(withStrategy(virtv1.RunStrategyRerunOnFailure), applied(virtv1.RunStrategyRerunOnFailure), requests(start)), none, decision{action: actCreate}},
		{"rerun keeps succeeded", mkVM(withStrategy(virtv1.RunStrategyRerunOnFailure), applied(virtv1.RunStrategyRerunOnFailure)), succeeded, decision{stoppedReason: "GuestShutdown"}},
		{"once starts when newly set", mkVM(withStrategy(virtv1.RunStrategyOnce)), none, decision{action: actCreate}},
		{"once never recreates", mkVM(withStrategy(virtv1.RunStrategyOnce), applied(virtv1.RunStrategyOnce)), none, decision{stoppedReason: "RanOnce"}},
		{"once keeps final", mkVM(withStrategy(virtv1.RunStrategyOnce), applied(virtv1.RunStrategyOnce)), failed, decision{stoppedReason: "RanOnce"}},
		{"manual idle", mkVM(withStrategy(virtv1.RunStrategyManual)), none, decision{stoppedReason: "Manual"}},
		{"manual running untouched", mkVM(withStrategy(virtv1.RunStrategyManual)), running, decision{}},
		{"manual start", mkVM(withStrategy(virtv1.RunStrategyManual), requests(start)), none, decision{action: actCreate}},
		{"start done once running", mkVM(withStrategy(virtv1.RunStrategyManual), requests(start)), running, decision{dropRequest: true}},
		{"start replaces final", mkVM(withStrategy(virtv1.RunStrategyManual), requests(start)), failed, decision{action: actDelete}},
		{"start waits for deletion", mkVM(withStrategy(virtv1.RunStrategyManual), requests(start)), deleting, decision{}},
		{"start respects backoff", mkVM(withStrategy(virtv1.RunStrategyManual), requests(start), backingOff(time.Minute)), none,
			decision{retryAfter: time.Minute, stoppedReason: "CrashLoopBackOff"}},
		{"stop deletes matching uid", mkVM(withStrategy(virtv1.RunStrategyManual), requests(stopA)), running, decision{action: actDelete, stoppedReason: "StopRequested"}},
		{"stop waits while deleting", mkVM(withStrategy(virtv1.RunStrategyManual), requests(stopA)), deleting, decision{stoppedReason: "StopRequested"}},
		{"stop for another uid is done", mkVM(withStrategy(virtv1.RunStrategyManual), requests(stopB)), running, decision{dropRequest: true, stoppedReason: "StopRequested"}},
		{"stop done when gone", mkVM(withStrategy(virtv1.RunStrategyAlways), requests(stopA, start)), none, decision{dropRequest: true, stoppedReason: "StopRequested"}},
		{"restart stop first", mkVM(withStrategy(virtv1.RunStrategyAlways), requests(stopA, start)), running, decision{action: actDelete, stoppedReason: "StopRequested"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, decide(tc.vm, tc.cur, now))
		})
	}
}

func TestBackoffDelayIsQuadraticJitteredAndCapped(t *testing.T) {
	assert.Zero(t, backoffDelay("uid", 0))
	prev := time.Duration(0)
	for n := 1; n <= 5; n++ {
		d := backoffDelay("uid", n)
		base := backoffBase * time.Duration(n*n)
		assert.GreaterOrEqual(t, d, base, "failure %d", n)
		assert.LessOrEqual(t, d, time.Duration(float64(base)*(1+backoffJitter)), "failure %d", n)
		assert.Greater(t, d, prev)
		prev = d
	}
	assert.Equal(t, backoffCap, backoffDelay("uid", 6))
	assert.Equal(t, backoffCap, backoffDelay("uid", 100))
	assert.Equal(t, backoffDelay("uid", 3), backoffDelay("uid", 3), "deterministic")
	assert.NotEqual(t, backoffDelay("uid-a", 3), backoffDelay("uid-b", 3), "jitter spreads VMs apart")
}

func TestRecordStartFailure(t *testing.T) {
	vm := mkVM()
	failedEarly := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{UID: "i1"}, Status: virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Failed}}
	recordStartFailure(vm, failedEarly, now)
	assert.Equal(t, 1, vm.Status.StartFailure.ConsecutiveFailCount)
	recordStartFailure(vm, failedEarly, now) // same instance: counted once
	assert.Equal(t, 1, vm.Status.StartFailure.ConsecutiveFailCount)
	second := failedEarly.DeepCopy()
	second.UID = "i2"
	recordStartFailure(vm, second, now)
	assert.Equal(t, 2, vm.Status.StartFailure.ConsecutiveFailCount)
	assert.Equal(t, now.Add(backoffDelay("vm-uid", 2)), vm.Status.StartFailure.RetryAfterTimestamp.Time)

	stopped := failedEarly.DeepCopy()
	stopped.UID, stopped.DeletionTimestamp = "i-stopped", &metav1.Time{Time: now}
	recordStartFailure(vm, stopped, now)
	assert.Equal(t, 2, vm.Status.StartFailure.ConsecutiveFailCount, "an instance being deleted (stopped) does not count")

	ran := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{UID: "i3"}, Status: virtv1.VirtualMachineInstanceStatus{
		Phase: virtv1.Failed, PhaseTransitionTimestamps: []virtv1.VirtualMachineInstancePhaseTransitionTimestamp{{Phase: virtv1.Running}},
	}}
	recordStartFailure(vm, ran, now)
	assert.Nil(t, vm.Status.StartFailure, "an instance that ran resets the count")
}
