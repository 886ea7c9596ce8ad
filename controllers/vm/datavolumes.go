package vm

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	itv1beta1 "github.com/podvirt/podvirt/api/instancetype/v1beta1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/optionalapi"
)

// DataVolumeGVK is CDI's DataVolume, which provisions the claim a dataVolume volume uses (CDI names
// the claim after the DataVolume). Podvirt does not run CDI; it creates a VM's DataVolumes when CDI
// is installed and says so when it is not.
var DataVolumeGVK = schema.GroupVersionKind{Group: "cdi.kubevirt.io", Version: "v1beta1", Kind: "DataVolume"}

// cdiInstalled reports whether the apiserver serves CDI's DataVolumes.
func (r *Reconciler) cdiInstalled() (bool, error) {
	return optionalapi.Served(r.Discovery, DataVolumeGVK)
}

// dataVolumeClaims are the claims of vm's template that a DataVolume provisions.
func dataVolumeClaims(vm *virtv1.VirtualMachine) []string {
	var names []string
	for _, v := range vm.Spec.Template.Spec.Volumes {
		if v.DataVolume != nil {
			names = append(names, v.DataVolume.Name)
		}
	}
	for _, t := range vm.Spec.DataVolumeTemplates {
		if !slices.Contains(names, t.ObjectMeta.Name) {
			names = append(names, t.ObjectMeta.Name)
		}
	}
	return names
}

// ensureDataVolumes creates the DataVolumes of vm's dataVolumeTemplates that do not exist yet,
// owned by vm, in the preference's preferred StorageClass when a template names none; CDI then
// provisions their claims.
func (r *Reconciler) ensureDataVolumes(ctx context.Context, vm *virtv1.VirtualMachine, pref *itv1beta1.VirtualMachinePreferenceSpec) error {
	for i := range vm.Spec.DataVolumeTemplates {
		t := &vm.Spec.DataVolumeTemplates[i]
		dvSpec := t.Spec.DeepCopy()
		if pref != nil && pref.Volumes != nil && pref.Volumes.PreferredStorageClassName != "" {
			preferStorageClass(dvSpec, pref.Volumes.PreferredStorageClassName)
		}
		spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(dvSpec)
		if err != nil {
			return fmt.Errorf("spec.dataVolumeTemplates[%d].spec: %w", i, err)
		}
		dv := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		dv.SetGroupVersionKind(DataVolumeGVK)
		dv.SetName(t.ObjectMeta.Name)
		dv.SetNamespace(vm.Namespace)
		dv.SetLabels(t.ObjectMeta.Labels)
		dv.SetAnnotations(t.ObjectMeta.Annotations)
		dv.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(vm, virtv1.SchemeGroupVersion.WithKind("VirtualMachine"))})
		if err := r.Client.Create(ctx, dv); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create DataVolume %s: %w", t.ObjectMeta.Name, err)
		}
	}
	return nil
}

// preferStorageClass sets the claim's StorageClass when the DataVolume names none.
func preferStorageClass(spec *virtv1.DataVolumeSpec, class string) {
	switch {
	case spec.Storage != nil && spec.Storage.StorageClassName == nil:
		spec.Storage.StorageClassName = &class
	case spec.PVC != nil && spec.PVC.StorageClassName == nil:
		spec.PVC.StorageClassName = &class
	}
}
