package vmi

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/controllers/podtemplate"
)

// persistentStateSize is the size of a persistent state claim: a TPM's state is a few KiB, OVMF's
// variable store 540 KiB (KubeVirt asks for the same).
var persistentStateSize = resource.MustParse("10Mi")

// ensurePersistentState creates the instance's persistent state claim when it needs one and it does
// not exist: owned by the instance's VM, so it lives as long as the VM (or by the instance itself,
// when no VM controls it), in the cluster's default StorageClass.
func (r *Reconciler) ensurePersistentState(ctx context.Context, vmi *virtv1.VirtualMachineInstance) error {
	if !vmi.Spec.PersistentState() {
		return nil
	}
	owner := metav1.GetControllerOf(vmi)
	if owner == nil || owner.Kind != "VirtualMachine" {
		owner = metav1.NewControllerRef(vmi, virtv1.SchemeGroupVersion.WithKind("VirtualMachineInstance"))
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: vmi.Namespace, Name: podtemplate.PersistentStateClaim(vmi), OwnerReferences: []metav1.OwnerReference{*owner}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: persistentStateSize}},
		},
	}
	err := r.Client.Create(ctx, pvc)
	switch {
	case apierrors.IsAlreadyExists(err):
		return r.checkPersistentState(ctx, client.ObjectKeyFromObject(pvc), owner.UID)
	case err != nil:
		return fmt.Errorf("create persistent state claim %s: %w", pvc.Name, err)
	}
	r.Recorder.Eventf(vmi, pvc, corev1.EventTypeNormal, virtv1.ReasonSuccessfulCreate, "Create", "Created persistent state claim %s", pvc.Name)
	return nil
}

// checkPersistentState accepts an existing persistent state claim that belongs to owner, or to
// nobody (made by hand, e.g. in another StorageClass); not one still being deleted (a VM deleted and
// created again under the same name) or another object's.
func (r *Reconciler) checkPersistentState(ctx context.Context, key client.ObjectKey, owner types.UID) error {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.APIReader.Get(ctx, key, pvc); err != nil {
		return fmt.Errorf("get persistent state claim %s: %w", key.Name, err)
	}
	if pvc.DeletionTimestamp != nil {
		return fmt.Errorf("persistent state claim %s is being deleted (its VM was deleted): waiting to create a new one", key.Name)
	}
	if ref := metav1.GetControllerOf(pvc); ref != nil && ref.UID != owner {
		return fmt.Errorf("persistent state claim %s belongs to %s %s, not to this instance's VM", key.Name, ref.Kind, ref.Name)
	}
	return nil
}
