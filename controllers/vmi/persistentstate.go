package vmi

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// persistentStateSize is the size of a persistent state claim: a TPM's state is a few KiB (KubeVirt
// asks for the same).
var persistentStateSize = resource.MustParse("10Mi")

// PersistentStateClaim names the claim that keeps an instance's state across restarts (a persistent
// TPM's): KubeVirt's name. A VM's instances share their VM's name, so each start finds it again.
func PersistentStateClaim(vmi *virtv1.VirtualMachineInstance) string {
	return "persistent-state-for-" + vmi.Name
}

// ensurePersistentState creates the instance's persistent state claim when it needs one and it does
// not exist: owned by the instance's VM, so it lives as long as the VM (or by the instance, when no
// VM controls it), in the cluster's default StorageClass.
func (r *Reconciler) ensurePersistentState(ctx context.Context, vmi *virtv1.VirtualMachineInstance) error {
	if !vmi.Spec.Domain.Devices.TPMPersistent() {
		return nil
	}
	owner := metav1.GetControllerOf(vmi)
	if owner == nil || owner.Kind != "VirtualMachine" {
		owner = metav1.NewControllerRef(vmi, virtv1.SchemeGroupVersion.WithKind("VirtualMachineInstance"))
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: vmi.Namespace, Name: PersistentStateClaim(vmi), OwnerReferences: []metav1.OwnerReference{*owner}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: persistentStateSize}},
		},
	}
	err := r.Client.Create(ctx, pvc)
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil
	case err != nil:
		return fmt.Errorf("create persistent state claim %s: %w", pvc.Name, err)
	}
	r.Recorder.Eventf(vmi, pvc, corev1.EventTypeNormal, "SuccessfulCreate", "Create", "Created persistent state claim %s for the TPM", pvc.Name)
	return nil
}
