package nodeagent

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/scheme"
)

// A migration hands an instance over by writing the target's node into its status; virt-api reads
// that live and sends the caller to the target's agent, whose cache may not have seen the write
// yet. The agent must find the instance anyway instead of answering "not on this node".
func TestFindReadsAHandedOverInstanceLive(t *testing.T) {
	handedOver := func(node string) *virtv1.VirtualMachineInstance {
		return &virtv1.VirtualMachineInstance{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mover", UID: "u1"},
			Status:     virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Running, NodeName: node, LauncherPod: "virt-launcher-mover-target"},
		}
	}
	live := handedOver("vm-1")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-mover-target", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: virtv1.GroupVersion.String(), Kind: "VirtualMachineInstance", Name: "mover", UID: "u1", Controller: new(bool)}}},
		Spec: corev1.PodSpec{NodeName: "vm-1"},
	}
	*pod.OwnerReferences[0].Controller = true
	stale := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(handedOver("vm-2"), pod).Build()
	fresh := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(live).Build()

	s := &SubresourceServer{Reader: stale, APIReader: fresh, NodeName: "vm-1"}
	vmi, got, code, msg := s.find(context.Background(), "ns", "mover")
	assert.Equal(t, http.StatusOK, code, msg)
	if assert.NotNil(t, vmi) && assert.NotNil(t, got) {
		assert.Equal(t, "vm-1", vmi.Status.NodeName)
		assert.Equal(t, pod.Name, got.Name)
	}

	// Elsewhere for real: still not found here.
	s = &SubresourceServer{Reader: stale, APIReader: stale, NodeName: "vm-1"}
	_, _, code, msg = s.find(context.Background(), "ns", "mover")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, msg, "is not on node vm-1")
}
