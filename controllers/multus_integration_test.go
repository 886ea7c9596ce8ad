package controllers_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/controllers/podtemplate"
	"github.com/podvirt/podvirt/controllers/vmi"
	"github.com/podvirt/podvirt/internal/optionalapi"
	"github.com/podvirt/podvirt/internal/testenv"
)

// networkAttachmentDefinitionCRD stands in for Multus' CRD: the API only, no Multus behind it.
func networkAttachmentDefinitionCRD() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "network-attachment-definitions.k8s.cni.cncf.io"},
		"spec": map[string]any{
			"group": "k8s.cni.cncf.io", "scope": "Namespaced",
			"names": map[string]any{"kind": "NetworkAttachmentDefinition", "listKind": "NetworkAttachmentDefinitionList",
				"plural": "network-attachment-definitions", "singular": "network-attachment-definition"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
}

// A VM with a Multus network gets an instance but no launcher Pod, and says why: Multus is not
// installed; once its API is served, the launcher Pod asks Multus for the network (the interface
// the node agent bridges to the guest) and for /dev/net/tun; once it is removed again, a new VM with
// a Multus network waits again (the controller asks discovery, not a mapper that remembers).
func TestMultusNetworkSaysWhyItWaits(t *testing.T) {
	e := testenv.Require(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	startControllers(t, ns)

	waitsForMultus := func(name string) *virtv1.VirtualMachineInstance {
		t.Helper()
		v := newVM(ns, name, virtv1.RunStrategyAlways)
		v.Spec.Template.Spec.Domain.Devices.Interfaces = []virtv1.Interface{
			{Name: "default", Masquerade: &virtv1.InterfaceMasquerade{}},
			{Name: "storage", Bridge: &virtv1.InterfaceBridge{}},
		}
		v.Spec.Template.Spec.Networks = []virtv1.Network{
			{Name: "default", NetworkSource: virtv1.NetworkSource{Pod: &virtv1.PodNetwork{}}},
			{Name: "storage", NetworkSource: virtv1.NetworkSource{Multus: &virtv1.MultusNetwork{NetworkName: "vlan-200"}}},
		}
		require.NoError(t, e.Client.Create(ctx, v))
		eventually(t, name+": Ready=False MultusNotInstalled naming the network", func() bool {
			c := condition(vmStatus(t, ns, name).Conditions, virtv1.VirtualMachineReady)
			return c.Reason == vmi.ReasonMultusNotInstalled && strings.Contains(c.Message, "storage (vlan-200)")
		})
		inst := instance(t, ns, name)
		require.NotNil(t, inst)
		assert.Equal(t, virtv1.Pending, inst.Status.Phase)
		assert.Nil(t, launcherPod(t, inst), "no launcher Pod without the network it needs")
		return inst
	}
	disc, err := discovery.NewDiscoveryClientForConfig(e.Config)
	require.NoError(t, err)
	multusServed := func() bool {
		served, err := optionalapi.Served(disc, vmi.NetworkAttachmentDefinitionGVK)
		return err == nil && served
	}
	inst := waitsForMultus("multus")

	crd := networkAttachmentDefinitionCRD()
	require.NoError(t, e.Client.Create(ctx, crd))
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), crd) })
	eventually(t, "the apiserver serves Multus' API", multusServed)
	// Nudge the instance rather than wait for the periodic recheck.
	patch := client.MergeFrom(inst.DeepCopy())
	inst.Annotations = map[string]string{"test/nudge": "1"}
	require.NoError(t, e.Client.Patch(ctx, inst, patch))
	var pod *corev1.Pod
	eventually(t, "a launcher Pod once Multus' API is served", func() bool {
		pod = launcherPod(t, instance(t, ns, "multus"))
		return pod != nil
	})
	want := `[{"name":"vlan-200","namespace":"` + ns + `","interface":"` + launcherv1.SecondaryNetworkDevices("storage").PodInterface + `"}]`
	assert.Equal(t, want, pod.Annotations[podtemplate.MultusNetworksAnnotation])
	assert.Equal(t, "1", pod.Spec.Containers[0].Resources.Limits.Name(launcherv1.TunResource, resource.DecimalSI).String())

	require.NoError(t, e.Client.Delete(ctx, crd))
	eventually(t, "the apiserver no longer serves Multus' API", func() bool {
		served, err := optionalapi.Served(disc, vmi.NetworkAttachmentDefinitionGVK)
		return err == nil && !served
	})
	waitsForMultus("multus-removed")
}
