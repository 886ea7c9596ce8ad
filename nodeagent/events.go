package nodeagent

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// Event reasons the agent records on instances.
const (
	EventStarted           = "Started"
	EventStopped           = "Stopped"
	EventFailed            = "Failed"
	EventPaused            = "Paused"
	EventUnpaused          = "Unpaused"
	EventSoftwareEmulation = "SoftwareEmulation"
	EventShuttingDown      = "ShuttingDown"
	EventSyncFailed        = "SyncFailed"
)

// userEvent is one Event to record on an instance.
type userEvent struct {
	Type, Reason, Action, Note string
}

// statusEvents are the Events a status change deserves, for users following `kubectl describe vmi`.
func statusEvents(before, after *virtv1.VirtualMachineInstanceStatus) []userEvent {
	var out []userEvent
	if before.Phase != after.Phase {
		switch after.Phase {
		case virtv1.Running:
			out = append(out, userEvent{corev1.EventTypeNormal, EventStarted, "Start", "The guest is running"})
		case virtv1.Succeeded:
			out = append(out, userEvent{corev1.EventTypeNormal, EventStopped, "Stop", "The guest stopped (" + after.Reason + "): " + readyMessage(after)})
		case virtv1.Failed:
			out = append(out, userEvent{corev1.EventTypeWarning, EventFailed, "Stop", "The guest failed (" + after.Reason + "): " + readyMessage(after)})
		}
	}
	wasPaused := meta.IsStatusConditionTrue(before.Conditions, virtv1.VirtualMachineInstancePaused)
	isPaused := meta.IsStatusConditionTrue(after.Conditions, virtv1.VirtualMachineInstancePaused)
	switch {
	case isPaused && !wasPaused:
		out = append(out, userEvent{corev1.EventTypeNormal, EventPaused, "Pause", "The guest is paused"})
	case wasPaused && !isPaused && after.Phase == virtv1.Running:
		out = append(out, userEvent{corev1.EventTypeNormal, EventUnpaused, "Unpause", "The guest is running again"})
	}
	emu := meta.FindStatusCondition(after.Conditions, virtv1.VirtualMachineInstanceSoftwareEmulation)
	if emu != nil && emu.Status == "True" && !meta.IsStatusConditionTrue(before.Conditions, virtv1.VirtualMachineInstanceSoftwareEmulation) {
		out = append(out, userEvent{corev1.EventTypeNormal, EventSoftwareEmulation, "Start", capitalize(emu.Message)})
	}
	return out
}

func readyMessage(st *virtv1.VirtualMachineInstanceStatus) string {
	if c := meta.FindStatusCondition(st.Conditions, virtv1.VirtualMachineInstanceReady); c != nil {
		return c.Message
	}
	return ""
}

// capitalize starts an Event note with a capital letter (condition messages start lower-case).
func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
