package vmi

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

func TestObservePod(t *testing.T) {
	now := metav1.Now()
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available"}}}}
	pulling := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "volume0-containerdisk", Image: "x/disk", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}}}
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{NodeName: "node-a"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	failed := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodFailed,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "compute", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", Message: "qemu killed"}}}}}}
	done := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}

	cases := []struct {
		name     string
		phase    virtv1.VirtualMachineInstancePhase
		pod      *corev1.Pod
		want     virtv1.VirtualMachineInstancePhase
		reason   string
		condType string
		condWhy  string
	}{
		{"unschedulable pod", virtv1.Pending, pending, virtv1.Scheduling, "", virtv1.VirtualMachineInstancePodScheduled, "Unschedulable"},
		{"image pull error", virtv1.Scheduling, pulling, virtv1.Scheduling, "", virtv1.VirtualMachineInstanceSynchronized, "ErrImagePull"},
		{"pod running", virtv1.Scheduling, running, virtv1.Scheduled, "", "", ""},
		{"agent territory untouched", virtv1.Running, running, virtv1.Running, "", "", ""},
		{"pod failed", virtv1.Running, failed, virtv1.Failed, "PodFailed", virtv1.VirtualMachineInstanceReady, "PodFailed"},
		{"pod completed", virtv1.Running, done, virtv1.Succeeded, "PodCompleted", "", ""},
		{"pod gone", virtv1.Scheduled, nil, virtv1.Failed, "PodDeleted", virtv1.VirtualMachineInstanceReady, "PodDeleted"},
		{"final stays final", virtv1.Succeeded, failed, virtv1.Succeeded, "", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := &virtv1.VirtualMachineInstance{Status: virtv1.VirtualMachineInstanceStatus{Phase: tc.phase}}
			observePod(v, tc.pod, now)
			assert.Equal(t, tc.want, v.Status.Phase)
			assert.Equal(t, tc.reason, v.Status.Reason)
			if tc.condType != "" {
				c := meta.FindStatusCondition(v.Status.Conditions, tc.condType)
				if assert.NotNil(t, c) {
					assert.Equal(t, tc.condWhy, c.Reason)
				}
			}
			if tc.want != tc.phase {
				assert.Equal(t, tc.want, v.Status.PhaseTransitionTimestamps[len(v.Status.PhaseTransitionTimestamps)-1].Phase)
			}
		})
	}
	v := &virtv1.VirtualMachineInstance{Status: virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Running}}
	observePod(v, failed, now)
	assert.Contains(t, meta.FindStatusCondition(v.Status.Conditions, virtv1.VirtualMachineInstanceReady).Message, "container compute exited 3 (Error): qemu killed")
	v = &virtv1.VirtualMachineInstance{Status: virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Scheduling}}
	observePod(v, running, now)
	assert.Equal(t, "node-a", v.Status.NodeName)
	assert.Equal(t, "p", v.Status.LauncherPod)
	assert.Nil(t, v.Status.QOSClass, "none known yet")
	burstable := running.DeepCopy()
	burstable.Status.QOSClass = corev1.PodQOSBurstable
	observePod(v, burstable, now)
	assert.Equal(t, ptr.To(corev1.PodQOSBurstable), v.Status.QOSClass, "the launcher Pod's QoS class, as KubeVirt reports it")
}

// A new Pod the scheduler has not judged keeps the instance Pending (nothing to write) for a moment;
// once bound, Scheduling names the node; a Pod left unjudged too long is Scheduling without one.
func TestObservePodWaitsForTheBinding(t *testing.T) {
	now := metav1.Now()
	fresh := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", CreationTimestamp: now}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	v := &virtv1.VirtualMachineInstance{Status: virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Pending}}
	wait := observePod(v, fresh, now)
	assert.Equal(t, bindWait, wait)
	assert.Equal(t, virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Pending}, v.Status, "nothing changed: no write")

	bound := fresh.DeepCopy()
	bound.Spec.NodeName = "node-a"
	assert.Zero(t, observePod(v, bound, now))
	assert.Equal(t, virtv1.Scheduling, v.Status.Phase)
	assert.Equal(t, "node-a", v.Status.NodeName)
	assert.Equal(t, "p", v.Status.LauncherPod)

	v = &virtv1.VirtualMachineInstance{Status: virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Pending}}
	later := metav1.NewTime(now.Add(bindWait))
	assert.Zero(t, observePod(v, fresh, later))
	assert.Equal(t, virtv1.Scheduling, v.Status.Phase, "no verdict within bindWait")
	assert.Empty(t, v.Status.NodeName)
}
