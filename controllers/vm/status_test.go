package vm

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/instancetype"
)

func mkVMI(phase virtv1.VirtualMachineInstancePhase, conds ...metav1.Condition) *virtv1.VirtualMachineInstance {
	return &virtv1.VirtualMachineInstance{Status: virtv1.VirtualMachineInstanceStatus{Phase: phase, Conditions: conds}}
}

func cond(t string, s metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: reason}
}

func TestPrintableStatus(t *testing.T) {
	ts := metav1.NewTime(now)
	deletingVM := mkVM()
	deletingVM.DeletionTimestamp = &ts
	deletingVMI := mkVMI(virtv1.Running)
	deletingVMI.DeletionTimestamp = &ts
	migrating := mkVMI(virtv1.Running)
	migrating.Status.MigrationState = &virtv1.VirtualMachineInstanceMigrationState{}

	cases := []struct {
		name string
		vm   *virtv1.VirtualMachine
		vmi  *virtv1.VirtualMachineInstance
		vols volumeState
		d    decision
		want virtv1.VirtualMachinePrintableStatus
	}{
		{"terminating wins over everything", deletingVM, mkVMI(virtv1.Running), volumeState{}, decision{}, virtv1.VirtualMachineStatusTerminating},
		{"stopping: instance deleting", mkVM(), deletingVMI, volumeState{}, decision{}, virtv1.VirtualMachineStatusStopping},
		{"stopping: about to delete", mkVM(), mkVMI(virtv1.Running), volumeState{}, decision{action: actDelete}, virtv1.VirtualMachineStatusStopping},
		{"migrating", mkVM(), migrating, volumeState{}, decision{}, virtv1.VirtualMachineStatusMigrating},
		{"paused", mkVM(), mkVMI(virtv1.Running, cond("Paused", metav1.ConditionTrue, "Paused")), volumeState{}, decision{}, virtv1.VirtualMachineStatusPaused},
		{"running", mkVM(), mkVMI(virtv1.Running), volumeState{}, decision{}, virtv1.VirtualMachineStatusRunning},
		{"pvc not found", mkVM(), nil, volumeState{missing: []string{"data"}}, decision{action: actCreate}, virtv1.VirtualMachineStatusPvcNotFound},
		{"waiting for the claim", mkVM(), nil, volumeState{missing: []string{"data"}}, decision{waitingForClaims: true}, virtv1.VirtualMachineStatusPvcNotFound},
		{"unschedulable", mkVM(), mkVMI(virtv1.Scheduling, cond("PodScheduled", metav1.ConditionFalse, "Unschedulable")), volumeState{}, decision{}, virtv1.VirtualMachineStatusUnschedulable},
		{"waiting for volume binding", mkVM(), mkVMI(virtv1.Scheduling), volumeState{unbound: []string{"data"}}, decision{}, virtv1.VirtualMachineStatusWaitingForVolumeBinding},
		{"image pull error", mkVM(), mkVMI(virtv1.Scheduling, cond("Synchronized", metav1.ConditionFalse, "ErrImagePull")), volumeState{}, decision{}, virtv1.VirtualMachineStatusErrImagePull},
		{"image pull backoff", mkVM(), mkVMI(virtv1.Scheduling, cond("Synchronized", metav1.ConditionFalse, "ImagePullBackOff")), volumeState{}, decision{}, virtv1.VirtualMachineStatusImagePullBackOff},
		{"starting: pending instance", mkVM(), mkVMI(virtv1.Pending), volumeState{}, decision{}, virtv1.VirtualMachineStatusStarting},
		{"starting: scheduled", mkVM(), mkVMI(virtv1.Scheduled), volumeState{}, decision{}, virtv1.VirtualMachineStatusStarting},
		{"starting: about to create", mkVM(), nil, volumeState{}, decision{action: actCreate}, virtv1.VirtualMachineStatusStarting},
		{"crash loop", mkVM(), nil, volumeState{}, decision{stoppedReason: "CrashLoopBackOff"}, virtv1.VirtualMachineStatusCrashLoopBackOff},
		{"crash loop with failed instance", mkVM(), mkVMI(virtv1.Failed), volumeState{}, decision{stoppedReason: "CrashLoopBackOff"}, virtv1.VirtualMachineStatusCrashLoopBackOff},
		{"stopped: nothing", mkVM(), nil, volumeState{}, decision{stoppedReason: "Halted"}, virtv1.VirtualMachineStatusStopped},
		{"stopped: succeeded instance kept", mkVM(), mkVMI(virtv1.Succeeded), volumeState{}, decision{stoppedReason: "GuestShutdown"}, virtv1.VirtualMachineStatusStopped},
		{"unknown", mkVM(), mkVMI(virtv1.Unknown), volumeState{}, decision{}, virtv1.VirtualMachineStatusUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, printableStatus(tc.vm, tc.vmi, tc.vols, tc.d))
		})
	}
}

func TestReadyConditionExplainsWhatTheVMWaitsFor(t *testing.T) {
	vm := mkVM()
	setReadyCondition(vm, mkVMI(virtv1.Scheduling, metav1.Condition{Type: "PodScheduled", Status: metav1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient memory."}), volumeState{}, true)
	c := vm.Status.Conditions[0]
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, "Unschedulable", c.Reason)
	assert.Contains(t, c.Message, "Insufficient memory")

	setReadyCondition(vm, nil, volumeState{unbound: []string{"data"}}, false)
	assert.Equal(t, "VMINotExists", vm.Status.Conditions[0].Reason)

	setReadyCondition(vm, nil, volumeState{missing: []string{"data", "dv"}, fromDataVolumes: []string{"dv"}, noCDI: true}, true)
	assert.Equal(t, "CDINotInstalled", vm.Status.Conditions[0].Reason)
	assert.Contains(t, vm.Status.Conditions[0].Message, "not found: data, dv; CDI is not installed")

	setReadyCondition(vm, mkVMI(virtv1.Scheduling), volumeState{unbound: []string{"data"}}, true)
	assert.Equal(t, "WaitingForVolumeBinding", vm.Status.Conditions[0].Reason)
	assert.Contains(t, vm.Status.Conditions[0].Message, "data")

	setReadyCondition(vm, mkVMI(virtv1.Running, cond("Ready", metav1.ConditionTrue, "GuestRunning")), volumeState{}, true)
	assert.Equal(t, metav1.ConditionTrue, vm.Status.Conditions[0].Status)
}

func TestStoppedCondition(t *testing.T) {
	vm := mkVM()
	setStoppedCondition(vm, nil, decision{stoppedReason: "Halted"})
	c := vm.Status.Conditions[0]
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, "Halted", c.Reason)

	failed := mkVMI(virtv1.Failed)
	failed.Status.Reason = "PodFailed"
	setStoppedCondition(vm, failed, decision{stoppedReason: "RanOnce"})
	assert.Contains(t, vm.Status.Conditions[0].Message, "the last instance failed: PodFailed")

	setStoppedCondition(vm, mkVMI(virtv1.Running), decision{})
	assert.Equal(t, metav1.ConditionFalse, vm.Status.Conditions[0].Status)
}

func TestNewInstanceKeepsFirmwareUUIDStable(t *testing.T) {
	vm := mkVM(withStrategy(virtv1.RunStrategyAlways))
	vm.Spec.Template = &virtv1.VirtualMachineInstanceTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}}}
	a, err := newInstance(vm, instancetype.Specs{})
	assert.NoError(t, err)
	vm.UID = "another-uid" // re-created VM of the same name
	b, _ := newInstance(vm, instancetype.Specs{})
	assert.Equal(t, a.Spec.Domain.Firmware.UUID, b.Spec.Domain.Firmware.UUID)
	other := vm.DeepCopy()
	other.Name = "other"
	c, _ := newInstance(other, instancetype.Specs{})
	assert.NotEqual(t, a.Spec.Domain.Firmware.UUID, c.Spec.Domain.Firmware.UUID)
	assert.Equal(t, "vm", a.Name)
	assert.Equal(t, []string{virtv1.VirtualMachineControllerFinalizer}, a.Finalizers)
	assert.Equal(t, templateHash(vm), a.Annotations[virtv1.TemplateHashAnnotation])
	assert.Nil(t, vm.Spec.Template.Spec.Domain.Firmware, "the VM's template is not modified")
}
