package vm

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// volumeState is what the controller found out about the PersistentVolumeClaims the template uses.
type volumeState struct {
	missing         []string // claims that do not exist
	unbound         []string // claims that exist and are not bound yet
	fromDataVolumes []string // missing claims a DataVolume provisions
	// noCDI: CDI is not installed, so nothing provisions fromDataVolumes (asked only when it
	// matters: Reconciler.observeCDI).
	noCDI bool
}

// waitingForCDI are the missing claims only CDI would provision, while it is not installed.
func (vs volumeState) waitingForCDI() []string {
	if !vs.noCDI {
		return nil
	}
	return vs.fromDataVolumes
}

// missingMessage says which claims are missing and, for DataVolumes, that nothing will provision them.
func (vs volumeState) missingMessage() (reason, message string) {
	message = "PersistentVolumeClaim(s) not found: " + strings.Join(vs.missing, ", ")
	waiting := vs.waitingForCDI()
	if len(waiting) == 0 {
		return "PVCNotFound", message
	}
	return "CDINotInstalled", message + "; CDI is not installed (no cdi.kubevirt.io DataVolume API), so nothing provisions the claim of DataVolume(s) " +
		strings.Join(waiting, ", ") + ": install CDI or create the claim"
}

// printableStatus computes the STATUS column. The checks run in KubeVirt's priority order; the first
// match wins.
func printableStatus(vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance, vols volumeState, d decision) virtv1.VirtualMachinePrintableStatus {
	live := vmi != nil && !vmi.Status.Phase.IsFinal()
	switch {
	case vm.DeletionTimestamp != nil:
		return virtv1.VirtualMachineStatusTerminating
	case live && (vmi.DeletionTimestamp != nil || d.action == actDelete):
		return virtv1.VirtualMachineStatusStopping
	case live && vmi.Status.MigrationState != nil && !vmi.Status.MigrationState.Completed && !vmi.Status.MigrationState.Failed:
		return virtv1.VirtualMachineStatusMigrating
	case live && conditionTrue(vmi.Status.Conditions, virtv1.VirtualMachineInstancePaused):
		return virtv1.VirtualMachineStatusPaused
	case live && vmi.Status.Phase == virtv1.Running:
		return virtv1.VirtualMachineStatusRunning
	case wantsInstance(d, vmi) && len(vols.missing) > 0:
		return virtv1.VirtualMachineStatusPvcNotFound
	case live && conditionReason(vmi.Status.Conditions, virtv1.VirtualMachineInstancePodScheduled) == corev1.PodReasonUnschedulable:
		return virtv1.VirtualMachineStatusUnschedulable
	case wantsInstance(d, vmi) && len(vols.unbound) > 0:
		return virtv1.VirtualMachineStatusWaitingForVolumeBinding
	case live && conditionReason(vmi.Status.Conditions, virtv1.VirtualMachineInstanceSynchronized) == "ErrImagePull":
		return virtv1.VirtualMachineStatusErrImagePull
	case live && conditionReason(vmi.Status.Conditions, virtv1.VirtualMachineInstanceSynchronized) == "ImagePullBackOff":
		return virtv1.VirtualMachineStatusImagePullBackOff
	case live && vmi.Status.Phase != virtv1.Unknown:
		return virtv1.VirtualMachineStatusStarting
	case d.action == actCreate:
		return virtv1.VirtualMachineStatusStarting
	case d.stoppedReason == "CrashLoopBackOff":
		return virtv1.VirtualMachineStatusCrashLoopBackOff
	case vmi == nil || vmi.Status.Phase.IsFinal():
		return virtv1.VirtualMachineStatusStopped
	}
	return virtv1.VirtualMachineStatusUnknown
}

// wantsInstance reports whether an instance exists or is about to be created.
func wantsInstance(d decision, vmi *virtv1.VirtualMachineInstance) bool {
	return d.action == actCreate || d.waitingForClaims || (vmi != nil && !vmi.Status.Phase.IsFinal())
}

func conditionTrue(conds []metav1.Condition, t string) bool {
	return meta.IsStatusConditionTrue(conds, t)
}

func conditionReason(conds []metav1.Condition, t string) string {
	if c := meta.FindStatusCondition(conds, t); c != nil && c.Status == metav1.ConditionFalse {
		return c.Reason
	}
	return ""
}

// setReadyCondition mirrors the instance's Ready condition; when not ready, the reason says what
// the VM waits for (unschedulable, image pull, volume binding…), so a VM stuck in Starting explains itself.
func setReadyCondition(vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance, vols volumeState, wanted bool) {
	c := metav1.Condition{Type: virtv1.VirtualMachineReady, Status: metav1.ConditionFalse, ObservedGeneration: vm.Generation}
	switch {
	case vmi == nil && wanted && len(vols.missing) > 0:
		c.Reason, c.Message = vols.missingMessage()
	case vmi == nil:
		c.Reason, c.Message = "VMINotExists", "No VirtualMachineInstance exists"
	case meta.IsStatusConditionTrue(vmi.Status.Conditions, virtv1.VirtualMachineInstanceReady):
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, "VMIReady", "The VirtualMachineInstance is ready"
	case len(vols.missing) > 0:
		c.Reason, c.Message = vols.missingMessage()
	case len(vols.unbound) > 0:
		c.Reason, c.Message = "WaitingForVolumeBinding", "PersistentVolumeClaim(s) not bound yet: "+strings.Join(vols.unbound, ", ")
	default:
		c.Reason, c.Message = instanceBlocker(vmi)
	}
	meta.SetStatusCondition(&vm.Status.Conditions, c)
}

// instanceBlocker names what keeps an instance from being ready. A start that merely progresses
// reads the same ("Starting"), so the VM's status is not rewritten at every step of it.
func instanceBlocker(vmi *virtv1.VirtualMachineInstance) (reason, message string) {
	for _, t := range []string{virtv1.VirtualMachineInstancePodScheduled, virtv1.VirtualMachineInstanceSynchronized} {
		if c := meta.FindStatusCondition(vmi.Status.Conditions, t); c != nil && c.Status == metav1.ConditionFalse && c.Reason != "" {
			return c.Reason, c.Message
		}
	}
	switch {
	case vmi.DeletionTimestamp != nil:
		return "Stopping", "The VirtualMachineInstance is shutting down"
	case vmi.Status.Phase.IsFinal():
		msg := fmt.Sprintf("The VirtualMachineInstance %s", strings.ToLower(string(vmi.Status.Phase)))
		if vmi.Status.Reason != "" {
			msg += ": " + vmi.Status.Reason
		}
		return "VMI" + string(vmi.Status.Phase), msg
	case vmi.Status.Phase == virtv1.Running:
		if c := meta.FindStatusCondition(vmi.Status.Conditions, virtv1.VirtualMachineInstanceReady); c != nil && c.Reason != "" {
			return c.Reason, c.Message
		}
		return "GuestNotReady", "The guest runs and is not ready yet"
	}
	return "Starting", "The VirtualMachineInstance is starting"
}

// setPausedCondition mirrors the instance's Paused condition.
func setPausedCondition(vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance) {
	if vmi != nil && meta.IsStatusConditionTrue(vmi.Status.Conditions, virtv1.VirtualMachineInstancePaused) {
		meta.SetStatusCondition(&vm.Status.Conditions, metav1.Condition{
			Type: virtv1.VirtualMachinePaused, Status: metav1.ConditionTrue, Reason: "Paused",
			Message: "The guest is paused", ObservedGeneration: vm.Generation,
		})
		return
	}
	meta.RemoveStatusCondition(&vm.Status.Conditions, virtv1.VirtualMachinePaused)
}

// setRestartRequiredCondition says whether the running instance was made from an older template.
func setRestartRequiredCondition(vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance, templateHash string) {
	if vmi != nil && !vmi.Status.Phase.IsFinal() && vmi.Annotations[virtv1.TemplateHashAnnotation] != templateHash {
		meta.SetStatusCondition(&vm.Status.Conditions, metav1.Condition{
			Type: virtv1.VirtualMachineRestartRequired, Status: metav1.ConditionTrue, Reason: "TemplateChanged",
			Message: "The template changed after the instance started; restart the VM to apply it", ObservedGeneration: vm.Generation,
		})
		return
	}
	meta.RemoveStatusCondition(&vm.Status.Conditions, virtv1.VirtualMachineRestartRequired)
}

// setFailureCondition reports an error acting on the instance, or clears it.
func setFailureCondition(vm *virtv1.VirtualMachine, err error, reason string) {
	if err == nil {
		meta.RemoveStatusCondition(&vm.Status.Conditions, virtv1.VirtualMachineFailure)
		return
	}
	meta.SetStatusCondition(&vm.Status.Conditions, metav1.Condition{
		Type: virtv1.VirtualMachineFailure, Status: metav1.ConditionTrue, Reason: reason,
		Message: err.Error(), ObservedGeneration: vm.Generation,
	})
}

// stoppedMessage explains a reason of the Stopped condition.
func stoppedMessage(reason string) string {
	switch reason {
	case "Halted":
		return "The run strategy is Halted (or spec.running is false)"
	case "StopRequested":
		return "A stop was requested"
	case "Stopped":
		return "The VM was stopped or its guest shut down; RerunOnFailure restarts it only after a failure"
	case launcherv1.ReasonGuestShutdown:
		return "The guest shut down"
	case "RanOnce":
		return "The run strategy is Once and the instance has run"
	case "Manual":
		return "The run strategy is Manual and no start was requested"
	case "CrashLoopBackOff":
		return "The VM failed to start; the next start is delayed by the crash-loop backoff"
	}
	return reason
}

// setStoppedCondition says plainly whether the VM is stopped and why.
func setStoppedCondition(vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance, d decision) {
	c := metav1.Condition{Type: virtv1.VirtualMachineStopped, ObservedGeneration: vm.Generation}
	running := vmi != nil && !vmi.Status.Phase.IsFinal()
	switch {
	case running || d.action == actCreate:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, "Started", "An instance exists or is being created"
	case d.stoppedReason != "":
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, d.stoppedReason, stoppedMessage(d.stoppedReason)
		if d.stoppedReason == "CrashLoopBackOff" && vm.Status.StartFailure != nil && vm.Status.StartFailure.RetryAfterTimestamp != nil {
			c.Message += fmt.Sprintf(" (failure %d, next start after %s)", vm.Status.StartFailure.ConsecutiveFailCount,
				vm.Status.StartFailure.RetryAfterTimestamp.UTC().Format("15:04:05Z"))
		}
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, "NoInstance", "No instance exists"
	}
	if vmi != nil && vmi.Status.Phase == virtv1.Failed && c.Status == metav1.ConditionTrue && vmi.Status.Reason != "" {
		c.Message += "; the last instance failed: " + vmi.Status.Reason
	}
	meta.SetStatusCondition(&vm.Status.Conditions, c)
}
