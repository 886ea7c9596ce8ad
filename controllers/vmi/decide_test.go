package vmi

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// podStates are the launcher Pod states a pass can observe.
func podStates() map[string]*corev1.Pod {
	now := metav1.Now()
	pod := func(phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-vm-abcde", UID: "pod-uid"}, Status: corev1.PodStatus{Phase: phase}}
	}
	deleting := pod(corev1.PodRunning)
	deleting.DeletionTimestamp = &now
	return map[string]*corev1.Pod{
		"missing":   nil,
		"pending":   pod(corev1.PodPending),
		"running":   pod(corev1.PodRunning),
		"failed":    pod(corev1.PodFailed),
		"succeeded": pod(corev1.PodSucceeded),
		"deleting":  deleting,
	}
}

type vmiObservation struct {
	phase     virtv1.VirtualMachineInstancePhase
	pod       string
	deleted   bool
	finalizer bool
	multus    bool // held for Multus
	badSpec   bool
}

func (o vmiObservation) scope() *scope {
	vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm"}, Status: virtv1.VirtualMachineInstanceStatus{Phase: o.phase}}
	if o.deleted {
		now := metav1.Now()
		vmi.DeletionTimestamp = &now
	}
	if o.finalizer {
		vmi.Finalizers = []string{virtv1.VirtualMachineControllerFinalizer}
	}
	s := &scope{vmi: vmi, pod: podStates()[o.pod], now: metav1.Now()}
	if o.multus {
		s.multusMissing = "network(s) blue need Multus"
	}
	if o.badSpec {
		s.renderErr = errors.New("spec.domain.devices.disks[0].name: bad")
	} else {
		s.render = &corev1.Pod{}
	}
	return s
}

func TestDecide(t *testing.T) {
	cases := []struct {
		name string
		obs  vmiObservation
		want action
	}{
		{"new instance gets its Pod", vmiObservation{phase: "", pod: "missing", finalizer: true}, actCreatePod},
		{"pending instance gets its Pod", vmiObservation{phase: virtv1.Pending, pod: "missing", finalizer: true}, actCreatePod},
		{"Multus missing holds it", vmiObservation{phase: virtv1.Pending, pod: "missing", finalizer: true, multus: true}, actHold},
		{"a spec that cannot run is refused", vmiObservation{phase: virtv1.Pending, pod: "missing", finalizer: true, badSpec: true}, actRefuse},
		{"Pod pending: follow it", vmiObservation{phase: virtv1.Scheduling, pod: "pending", finalizer: true}, actNone},
		{"Pod gone while scheduled: status says so", vmiObservation{phase: virtv1.Scheduled, pod: "missing", finalizer: true}, actNone},
		{"running: the agent's territory", vmiObservation{phase: virtv1.Running, pod: "running", finalizer: true}, actNone},
		{"failed with a running Pod: stop it", vmiObservation{phase: virtv1.Failed, pod: "running", finalizer: true}, actDeletePod},
		{"succeeded with a pending Pod: stop it", vmiObservation{phase: virtv1.Succeeded, pod: "pending", finalizer: true}, actDeletePod},
		{"succeeded with a completed Pod: keep its logs", vmiObservation{phase: virtv1.Succeeded, pod: "succeeded", finalizer: true}, actNone},
		{"failed with a Pod being deleted", vmiObservation{phase: virtv1.Failed, pod: "deleting", finalizer: true}, actNone},
		{"final without a Pod: nothing to create", vmiObservation{phase: virtv1.Failed, pod: "missing", finalizer: true}, actNone},
		{"deleted: delete its Pod", vmiObservation{phase: virtv1.Running, pod: "running", deleted: true, finalizer: true}, actDeletePod},
		{"deleted, Pod ended: still deleted", vmiObservation{phase: virtv1.Succeeded, pod: "succeeded", deleted: true, finalizer: true}, actDeletePod},
		{"deleted, Pod going: wait", vmiObservation{phase: virtv1.Running, pod: "deleting", deleted: true, finalizer: true}, actNone},
		{"deleted, Pod gone: release", vmiObservation{phase: virtv1.Running, pod: "missing", deleted: true, finalizer: true}, actRelease},
		{"deleted, released", vmiObservation{phase: virtv1.Running, pod: "missing", deleted: true}, actNone},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want.String(), decide(c.obs.scope()).String())
		})
	}
}

// TestDecideInvariants walks every Pod state × instance phase × deletion and checks the rules
// no row may break.
func TestDecideInvariants(t *testing.T) {
	phases := []virtv1.VirtualMachineInstancePhase{"", virtv1.Pending, virtv1.Scheduling, virtv1.Scheduled, virtv1.Running, virtv1.Succeeded, virtv1.Failed}
	for _, phase := range phases {
		for pod := range podStates() {
			for _, deleted := range []bool{false, true} {
				o := vmiObservation{phase: phase, pod: pod, deleted: deleted, finalizer: true}
				name := fmt.Sprintf("%s/%s/deleted=%v", phase, pod, deleted)
				a := decide(o.scope())
				pending := phase == "" || phase == virtv1.Pending
				if a == actCreatePod && (pod != "missing" || deleted || !pending) {
					t.Errorf("%s: created a second Pod or one past Pending", name)
				}
				if a == actRelease && pod != "missing" {
					t.Errorf("%s: released an instance whose Pod is still there", name)
				}
				if a == actDeletePod && !deleted && !phase.IsFinal() {
					t.Errorf("%s: deleted the Pod of a live instance", name)
				}
				if a == actDeletePod && pod == "deleting" {
					t.Errorf("%s: deleted a Pod twice", name)
				}
			}
		}
	}
}
