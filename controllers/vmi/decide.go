package vmi

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// action is what one pass does to the instance's launcher Pod besides writing the instance's status.
type action int

const (
	actNone action = iota
	// actCreatePod creates the launcher Pod (scope.render) and, first, its persistent state claim.
	actCreatePod
	// actDeletePod deletes the launcher Pod: the instance is being deleted, or it ended and the
	// Pod still runs.
	actDeletePod
	// actRelease removes the finalizer of a deleted instance whose Pod is gone.
	actRelease
	// actHold keeps the instance Pending without a Pod: its Multus networks need an API the
	// cluster does not serve (scope.multusMissing says which).
	actHold
	// actRefuse fails the instance: its spec can never run (scope.renderErr says why).
	actRefuse
)

func (a action) String() string {
	return [...]string{"None", "CreatePod", "DeletePod", "Release", "Hold", "Refuse"}[a]
}

// decide is the pass's one action from what it observed. It is level based: the same
// observation always gives the same action, whatever the pass before did. The status follows
// from the action's outcome and the Pod (observePod).
func decide(s *scope) action {
	vmi, pod := s.vmi, s.pod
	switch {
	case vmi.DeletionTimestamp != nil:
		switch {
		case !controllerutil.ContainsFinalizer(vmi, virtv1.VirtualMachineControllerFinalizer):
			return actNone
		case pod == nil:
			return actRelease
		case pod.DeletionTimestamp == nil:
			return actDeletePod // its grace period covers the guest's shutdown
		}
		return actNone // the Pod's deletion brings the next pass
	case vmi.Status.Phase.IsFinal():
		if pod != nil && pod.DeletionTimestamp == nil && !podEnded(pod) {
			return actDeletePod // no guest will ever run in it again; a completed Pod is kept for its logs
		}
		return actNone
	case pod != nil || (vmi.Status.Phase != "" && vmi.Status.Phase != virtv1.Pending):
		return actNone
	case s.multusMissing != "":
		return actHold
	case s.renderErr != nil:
		return actRefuse
	}
	return actCreatePod
}

func podEnded(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}
