package localcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// ProvisionerName is the provisioner of the default StorageClass.
const ProvisionerName = "podvirt.io/local-hostpath"

const annProvisionedBy = "pv.kubernetes.io/provisioned-by"

// RunProvisioner serves the default StorageClass until ctx ends: every pending filesystem claim of
// the class gets a hostPath PersistentVolume in its own directory under dir (world-writable, so
// pods of any user can write), pre-bound to the claim; released volumes are deleted with their
// directory. It polls once a second, which is plenty for one node.
func RunProvisioner(ctx context.Context, cs kubernetes.Interface, dir string, log io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	pass := func(ctx context.Context) (bool, error) {
		if err := provisionPass(ctx, cs, dir); err != nil {
			fmt.Fprintf(log, "%s provisioner: %v\n", time.Now().Format(time.RFC3339), err)
		}
		return false, nil
	}
	err := wait.PollUntilContextCancel(ctx, time.Second, true, pass)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func provisionPass(ctx context.Context, cs kubernetes.Interface, dir string) error {
	pvcs, err := cs.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list claims: %w", err)
	}
	pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list volumes: %w", err)
	}
	have := map[string]bool{}
	for _, pv := range pvs.Items {
		have[pv.Name] = true
		if pv.Annotations[annProvisionedBy] == ProvisionerName && pv.Status.Phase == corev1.VolumeReleased {
			if err := deleteVolume(ctx, cs, dir, &pv); err != nil {
				return err
			}
		}
	}
	for i := range pvcs.Items {
		pvc := &pvcs.Items[i]
		if !wantsVolume(pvc) || have[volumeName(pvc)] {
			continue
		}
		if err := createVolume(ctx, cs, dir, pvc); err != nil {
			return err
		}
	}
	return nil
}

func wantsVolume(pvc *corev1.PersistentVolumeClaim) bool {
	return pvc.Spec.StorageClassName != nil && *pvc.Spec.StorageClassName == StorageClassName &&
		pvc.Spec.VolumeName == "" && pvc.Status.Phase == corev1.ClaimPending && pvc.DeletionTimestamp == nil &&
		(pvc.Spec.VolumeMode == nil || *pvc.Spec.VolumeMode == corev1.PersistentVolumeFilesystem)
}

func volumeName(pvc *corev1.PersistentVolumeClaim) string { return "pvc-" + string(pvc.UID) }

func createVolume(ctx context.Context, cs kubernetes.Interface, dir string, pvc *corev1.PersistentVolumeClaim) error {
	name := volumeName(pvc)
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(p, 0o777); err != nil {
		return err
	}
	if err := os.Chmod(p, 0o777); err != nil { // MkdirAll is subject to the umask
		return err
	}
	hostPathType := corev1.HostPathDirectory
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annProvisionedBy: ProvisionerName}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              StorageClassName,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p, Type: &hostPathType}},
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create volume for claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	return nil
}

func deleteVolume(ctx context.Context, cs kubernetes.Interface, dir string, pv *corev1.PersistentVolume) error {
	if hp := pv.Spec.HostPath; hp != nil && strings.HasPrefix(hp.Path, dir+string(filepath.Separator)) {
		if err := os.RemoveAll(hp.Path); err != nil {
			return fmt.Errorf("remove volume %s data: %w", pv.Name, err)
		}
	}
	err := cs.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete volume %s: %w", pv.Name, err)
	}
	return nil
}

// ensureStorageClass makes podvirt-local the default StorageClass.
func ensureStorageClass(ctx context.Context, cs kubernetes.Interface) error {
	mode := storagev1.VolumeBindingImmediate
	reclaim := corev1.PersistentVolumeReclaimDelete
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: StorageClassName,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       ProvisionerName,
		ReclaimPolicy:     &reclaim,
		VolumeBindingMode: &mode,
	}
	_, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create storage class: %w", err)
	}
	return nil
}
