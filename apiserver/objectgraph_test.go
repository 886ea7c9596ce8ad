package apiserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	podvirtscheme "github.com/podvirt/podvirt/internal/scheme"
)

// The object graph of a VM: its instance with the launcher Pod, instancetype (optional) with its
// revision, volumes' and credentials' objects, network attachments (optional); the options filter
// it, never the root; a namespace named like a resource does not confuse VMs with instances.
func TestObjectGraph(t *testing.T) {
	const ns = "virtualmachines"
	vm := &virtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vm1"},
		Spec: virtv1.VirtualMachineSpec{
			Instancetype: &virtv1.InstancetypeMatcher{Name: "u1.small"},
			Template: &virtv1.VirtualMachineInstanceTemplateSpec{Spec: virtv1.VirtualMachineInstanceSpec{
				Volumes: []virtv1.Volume{
					{Name: "d", VolumeSource: virtv1.VolumeSource{DataVolume: &virtv1.DataVolumeSource{Name: "dv1"}}},
					{Name: "c", VolumeSource: virtv1.VolumeSource{CloudInitNoCloud: &virtv1.CloudInitNoCloudSource{SecretRef: &corev1.LocalObjectReference{Name: "ud"}}}},
				},
				Networks: []virtv1.Network{{Name: "blue", NetworkSource: virtv1.NetworkSource{Multus: &virtv1.MultusNetwork{NetworkName: "other/blue-net"}}}},
				AccessCredentials: []virtv1.AccessCredential{{UserPassword: &virtv1.UserPasswordAccessCredential{
					Source: virtv1.UserPasswordAccessCredentialSource{Secret: &virtv1.AccessCredentialSecretSource{SecretName: "pw"}}}}},
			}},
		},
		Status: virtv1.VirtualMachineStatus{Created: true, InstancetypeRef: &virtv1.InstancetypeStatusRef{
			Name: "u1.small", ControllerRevisionRef: &virtv1.ControllerRevisionRef{Name: "vm1-u1.small-1"}}},
	}
	vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vm1", UID: "uid-1"},
		Status: virtv1.VirtualMachineInstanceStatus{LauncherPod: "virt-launcher-vm1-abcde"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "virt-launcher-vm1-abcde", Labels: map[string]string{launcherv1.CreatedByLabel: "uid-1"}}}
	h := &Handlers{Client: fake.NewClientBuilder().WithScheme(podvirtscheme.New()).WithObjects(vm, vmi, pod).Build()}
	mux := http.NewServeMux()
	h.Routes(mux, "/apis/subresources.kubevirt.io/v1")
	graph := func(resource, body string) virtv1.ObjectGraphNode {
		t.Helper()
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/apis/subresources.kubevirt.io/v1/namespaces/"+ns+"/"+resource+"/vm1/objectgraph", strings.NewReader(body)))
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())
		var n virtv1.ObjectGraphNode
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &n))
		return n
	}
	names := func(n virtv1.ObjectGraphNode) []string {
		var out []string
		var walk func(virtv1.ObjectGraphNode, string)
		walk = func(n virtv1.ObjectGraphNode, indent string) {
			out = append(out, indent+n.ObjectReference.Kind+"/"+n.ObjectReference.Name)
			for _, c := range n.Children {
				walk(c, indent+" ")
			}
		}
		walk(n, "")
		return out
	}
	assert.Equal(t, []string{
		"VirtualMachine/vm1",
		" VirtualMachineInstance/vm1", "  Pod/virt-launcher-vm1-abcde",
		" VirtualMachineClusterInstancetype/u1.small", " ControllerRevision/vm1-u1.small-1",
		" Secret/pw", " DataVolume/dv1", "  PersistentVolumeClaim/dv1", " Secret/ud",
		" NetworkAttachmentDefinition/blue-net",
	}, names(graph("virtualmachines", "")))

	assert.Equal(t, []string{"VirtualMachineInstance/vm1", " Pod/virt-launcher-vm1-abcde"}, names(graph("virtualmachineinstances", "")))

	vm.Spec.Instancetype.Kind = "virtualmachineinstancetype" // namespaced, as users may spell it
	require.NoError(t, h.Client.Update(t.Context(), vm))
	assert.Contains(t, names(graph("virtualmachines", "")), " VirtualMachineInstancetype/u1.small")

	opts, _ := json.Marshal(virtv1.ObjectGraphOptions{IncludeOptionalNodes: ptr.To(false),
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{virtv1.DependencyTypeLabel: "storage"}}})
	assert.Equal(t, []string{"VirtualMachine/vm1", " DataVolume/dv1", "  PersistentVolumeClaim/dv1"}, names(graph("virtualmachines", string(opts))))
	opts, _ = json.Marshal(virtv1.ObjectGraphOptions{IncludeOptionalNodes: ptr.To(false)})
	assert.Contains(t, names(graph("virtualmachines", string(opts))), " ControllerRevision/vm1-u1.small-1", "the revision the VM runs with is not optional")

	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/apis/subresources.kubevirt.io/v1/namespaces/"+ns+"/virtualmachines/vm1/objectgraph",
		strings.NewReader(`{"labelSelector":{"matchExpressions":[{"key":"a","operator":"Bogus"}]}}`)))
	assert.Equal(t, http.StatusBadRequest, w.Code, "a selector that does not parse: %s", w.Body.String())
}
