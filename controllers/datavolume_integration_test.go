package controllers_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	itv1beta1 "github.com/podvirt/podvirt/api/instancetype/v1beta1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/controllers/vm"
	"github.com/podvirt/podvirt/internal/optionalapi"
	"github.com/podvirt/podvirt/internal/testenv"
)

// dataVolumeCRD stands in for CDI's DataVolume CRD: the API only, no CDI behind it.
func dataVolumeCRD() *unstructured.Unstructured {
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "datavolumes.cdi.kubevirt.io"},
		"spec": map[string]any{
			"group": "cdi.kubevirt.io", "scope": "Namespaced",
			"names": map[string]any{"kind": "DataVolume", "listKind": "DataVolumeList", "plural": "datavolumes", "singular": "datavolume"},
			"versions": []any{map[string]any{"name": "v1beta1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	return crd
}

// Without CDI, a VM whose disks come from DataVolumes does not start and says CDI is not
// installed; once the claim exists (made by hand) it starts on it. With CDI's API served, the VM's
// dataVolumeTemplates become DataVolumes it owns, in its preference's preferred StorageClass.
func TestDataVolumesWithAndWithoutCDI(t *testing.T) {
	e := testenv.Require(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	startControllers(t, ns)

	v := newVM(ns, "dv", virtv1.RunStrategyAlways)
	v.Spec.Template.Spec.Volumes[0].VolumeSource = virtv1.VolumeSource{DataVolume: &virtv1.DataVolumeSource{Name: "dv-root"}}
	require.NoError(t, e.Client.Create(ctx, v))
	eventually(t, "Ready=False CDINotInstalled naming the DataVolume", func() bool {
		c := condition(vmStatus(t, ns, "dv").Conditions, virtv1.VirtualMachineReady)
		return c.Reason == "CDINotInstalled" && strings.Contains(c.Message, "DataVolume(s) dv-root")
	})
	assert.Nil(t, instance(t, ns, "dv"), "no instance while its claim is missing")

	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dv-root"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	require.NoError(t, e.Client.Create(ctx, pvc))
	var pod *corev1.Pod
	eventually(t, "an instance whose launcher Pod mounts the claim", func() bool {
		v := instance(t, ns, "dv")
		if v == nil {
			return false
		}
		pod = launcherPod(t, v)
		return pod != nil
	})
	claims := []string{}
	for _, vol := range pod.Spec.Volumes {
		if vol.PersistentVolumeClaim != nil {
			claims = append(claims, vol.PersistentVolumeClaim.ClaimName)
		}
	}
	assert.Equal(t, []string{"dv-root"}, claims)

	crd := dataVolumeCRD()
	require.NoError(t, e.Client.Create(ctx, crd))
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), crd) })
	// The CRD is served once discovery lists it; a VM reconciled before that waits for the recheck.
	disc, err := discovery.NewDiscoveryClientForConfig(e.Config)
	require.NoError(t, err)
	eventually(t, "the apiserver serves CDI's DataVolume API", func() bool {
		served, err := optionalapi.Served(disc, vm.DataVolumeGVK)
		return err == nil && served
	})
	pref := &itv1beta1.VirtualMachinePreference{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fast-disks"},
		Spec: itv1beta1.VirtualMachinePreferenceSpec{Volumes: &itv1beta1.VolumePreferences{PreferredStorageClassName: "fast"}}}
	require.NoError(t, e.Client.Create(ctx, pref))
	w := newVM(ns, "templated", virtv1.RunStrategyAlways)
	w.Spec.Preference = &virtv1.PreferenceMatcher{Kind: "VirtualMachinePreference", Name: pref.Name}
	w.Spec.Template.Spec.Volumes[0].VolumeSource = virtv1.VolumeSource{DataVolume: &virtv1.DataVolumeSource{Name: "templated-root"}}
	w.Spec.DataVolumeTemplates = []virtv1.DataVolumeTemplateSpec{{
		ObjectMeta: metav1.ObjectMeta{Name: "templated-root", Labels: map[string]string{"os": "fedora"}},
		Spec: virtv1.DataVolumeSpec{
			Source:  &virtv1.CDIDataVolumeSource{Registry: &virtv1.DataVolumeSourceRegistry{URL: ptrTo("docker://quay.io/containerdisks/fedora:40")}},
			Storage: &virtv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}},
		},
	}}
	require.NoError(t, e.Client.Create(ctx, w))
	dv := &unstructured.Unstructured{}
	dv.SetGroupVersionKind(vm.DataVolumeGVK)
	eventually(t, "the DataVolume, owned by the VM", func() bool {
		return e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "templated-root"}, dv) == nil
	})
	url, _, _ := unstructured.NestedString(dv.Object, "spec", "source", "registry", "url")
	assert.Equal(t, "docker://quay.io/containerdisks/fedora:40", url)
	assert.Equal(t, "fedora", dv.GetLabels()["os"])
	assert.Equal(t, "templated", dv.GetOwnerReferences()[0].Name)
	class, _, _ := unstructured.NestedString(dv.Object, "spec", "storage", "storageClassName")
	assert.Equal(t, "fast", class, "the preference's preferredStorageClassName, the template naming none")
	eventually(t, "CDI is there: the VM waits for the claim it provisions (PVCNotFound)", func() bool {
		return condition(vmStatus(t, ns, "templated").Conditions, virtv1.VirtualMachineReady).Reason == "PVCNotFound"
	})
}

func ptrTo[T any](v T) *T { return &v }
