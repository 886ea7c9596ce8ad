package vmi

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/launcherpod"
)

// bindWait is how long a new launcher Pod may wait for the scheduler's verdict before its instance
// says Scheduling without a node (more than the creation timestamp's one-second granularity).
const bindWait = 2 * time.Second

// observePod advances the instance's status from what its launcher Pod shows; pod is nil when
// the Pod is confirmed gone. Until Scheduled this controller owns the phase; afterwards it only
// ends the instance when the Pod ends or vanishes (the node agent reports Running and the guest's end).
//
// A new Pod the scheduler has not judged yet leaves the instance Pending for up to bindWait (the
// scheduler binds in milliseconds): its first status write, Scheduling, then names the node, whose
// agent can prepare the guest while the kubelet starts the Pod — in the same two writes as before
// (Scheduling, Scheduled). It returns how soon to look again while it waits.
func observePod(vmi *virtv1.VirtualMachineInstance, pod *corev1.Pod, now metav1.Time) time.Duration {
	st := &vmi.Status
	if st.Phase.IsFinal() {
		return 0
	}
	if pod == nil {
		if st.Phase == virtv1.Scheduling || st.Phase == virtv1.Scheduled || st.Phase == virtv1.Running {
			st.SetPhase(virtv1.Failed, virtv1.ReasonPodDeleted, now)
			setReady(st, virtv1.ReasonPodDeleted, "The launcher Pod was deleted")
		}
		return 0
	}
	if wait := awaitingBinding(st, pod, now); wait > 0 {
		return wait
	}
	st.LauncherPod = pod.Name
	if pod.Status.QOSClass != "" { // set by the apiserver when the Pod is created: no write of its own
		st.QOSClass = ptr.To(pod.Status.QOSClass)
	}
	if ms := st.MigrationState; ms != nil && !ms.Completed && !ms.Failed && ms.SourcePod == pod.Name && pod.Status.Phase == corev1.PodSucceeded {
		return 0 // the guest moved to the migration target: the source's node agent hands the instance over
	}
	switch {
	case pod.DeletionTimestamp != nil && vmi.DeletionTimestamp == nil:
		st.SetPhase(virtv1.Failed, virtv1.ReasonPodDeleted, now)
		setReady(st, virtv1.ReasonPodDeleted, "The launcher Pod is being deleted")
	case pod.Status.Phase == corev1.PodFailed:
		st.SetPhase(virtv1.Failed, virtv1.ReasonPodFailed, now)
		setReady(st, virtv1.ReasonPodFailed, podEndMessage(pod))
	case pod.Status.Phase == corev1.PodSucceeded:
		st.SetPhase(virtv1.Succeeded, virtv1.ReasonPodCompleted, now)
		setReady(st, virtv1.ReasonPodCompleted, podEndMessage(pod))
	case st.Phase == virtv1.Scheduled || st.Phase == virtv1.Running:
		// The node agent's territory.
	case pod.Status.Phase == corev1.PodRunning:
		st.SetPhase(virtv1.Scheduled, "", now)
		st.NodeName = pod.Spec.NodeName
		meta.RemoveStatusCondition(&st.Conditions, virtv1.VirtualMachineInstanceSynchronized)
		mirrorScheduled(st, pod)
		setLiveMigratable(vmi)
	default:
		st.SetPhase(virtv1.Scheduling, "", now)
		st.NodeName = pod.Spec.NodeName
		mirrorScheduled(st, pod)
		setSynchronized(st, pod)
		if c := meta.FindStatusCondition(st.Conditions, virtv1.VirtualMachineInstanceReady); c == nil {
			setReady(st, "LauncherPodStarting", "The launcher Pod is starting")
		}
	}
	return 0
}

// awaitingBinding is how much longer a Pending instance waits for its new Pod's node: while the Pod
// is pending and unbound, the scheduler has not called it unschedulable, and bindWait has not passed.
func awaitingBinding(st *virtv1.VirtualMachineInstanceStatus, pod *corev1.Pod, now metav1.Time) time.Duration {
	pending := st.Phase == "" || st.Phase == virtv1.Pending
	if !pending || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || (pod.Status.Phase != "" && pod.Status.Phase != corev1.PodPending) {
		return 0
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return 0 // judged: unschedulable (bound Pods have a node)
		}
	}
	return min(max(bindWait-now.Sub(pod.CreationTimestamp.Time), 0), bindWait) // bounded: clocks differ
}

// setReady sets Ready=False; the node agent sets Ready=True once the guest runs.
func setReady(st *virtv1.VirtualMachineInstanceStatus, reason, message string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: virtv1.VirtualMachineInstanceReady, Status: metav1.ConditionFalse, Reason: reason, Message: message})
}

// mirrorScheduled reports the Pod's PodScheduled condition while the scheduler cannot place it
// (reason Unschedulable with the scheduler's message); once placed the condition is removed, so a
// normal start costs no extra write.
func mirrorScheduled(st *virtv1.VirtualMachineInstanceStatus, pod *corev1.Pod) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			reason := c.Reason
			if reason == "" {
				reason = "NotScheduled"
			}
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{
				Type: virtv1.VirtualMachineInstancePodScheduled, Status: metav1.ConditionFalse, Reason: reason, Message: c.Message,
			})
			return
		}
	}
	meta.RemoveStatusCondition(&st.Conditions, virtv1.VirtualMachineInstancePodScheduled)
}

// setSynchronized reports a container of the Pod that cannot start, or clears the condition.
func setSynchronized(st *virtv1.VirtualMachineInstanceStatus, pod *corev1.Pod) {
	if reason, message, stuck := launcherpod.StuckContainer(pod); stuck {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: virtv1.VirtualMachineInstanceSynchronized, Status: metav1.ConditionFalse, Reason: reason, Message: message,
		})
		return
	}
	meta.RemoveStatusCondition(&st.Conditions, virtv1.VirtualMachineInstanceSynchronized)
}

// podEndMessage says how the Pod's containers ended.
func podEndMessage(pod *corev1.Pod) string {
	var parts []string
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if t := cs.State.Terminated; t != nil && (t.ExitCode != 0 || cs.Name == launcherv1.ComputeContainer) {
			msg := fmt.Sprintf("container %s exited %d (%s)", cs.Name, t.ExitCode, t.Reason)
			if t.Message != "" {
				msg += ": " + strings.TrimSpace(t.Message)
			}
			parts = append(parts, msg)
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("the launcher Pod ended %s %s", pod.Status.Phase, pod.Status.Reason)
	}
	return strings.Join(parts, "; ")
}
