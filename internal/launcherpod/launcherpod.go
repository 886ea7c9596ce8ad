// Package launcherpod reads what a launcher Pod's status says about its containers, for the two
// components that report it on the instance (the VMI controller and the node agent). It is apart
// from api/launcher/v1 so that the launcher Pod's small static helpers, which import that contract,
// do not link the Kubernetes API types.
package launcherpod

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// StuckContainer names the first container of a launcher Pod (init or regular) that waits for a
// reason other than the normal start (ContainerCreating, PodInitializing): an image that cannot be
// pulled, a container that cannot be created. Both the VMI controller (before the guest is the node
// agent's) and the node agent (while the launcher waits for its disks) report it on the instance:
// reason is the kubelet's (ErrImagePull …), message names the container and its image.
func StuckContainer(pod *corev1.Pod) (reason, message string, stuck bool) {
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range statuses {
			if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "PodInitializing" && w.Reason != "ContainerCreating" {
				return w.Reason, fmt.Sprintf("container %s (%s): %s", cs.Name, cs.Image, w.Message), true
			}
		}
	}
	return "", "", false
}

// FailedContainer names the first regular container of a launcher Pod, other than those named in
// except, that has ended with a non-zero exit code (killed, out of memory, failed), with how.
func FailedContainer(pod *corev1.Pod, except ...string) (message string, failed bool) {
	for _, cs := range pod.Status.ContainerStatuses {
		t := cs.State.Terminated
		if t == nil || t.ExitCode == 0 || slices.Contains(except, cs.Name) {
			continue
		}
		msg := fmt.Sprintf("container %s (%s) exited with code %d", cs.Name, cs.Image, t.ExitCode)
		if t.Reason != "" {
			msg += " (" + t.Reason + ")"
		}
		if t.Message != "" {
			msg += ": " + t.Message
		}
		return msg, true
	}
	return "", false
}
