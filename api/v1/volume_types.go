package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Volume is a named source of disk data.
//
// +kubebuilder:validation:XValidation:rule="[has(self.containerDisk), has(self.persistentVolumeClaim), has(self.cloudInitNoCloud), has(self.emptyDisk)].filter(x, x).size() == 1",message="a volume must set exactly one of containerDisk, persistentVolumeClaim, cloudInitNoCloud, emptyDisk"
type Volume struct {
	// Name the disks refer to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	VolumeSource `json:",inline"`
}

// VolumeSource is where a volume's data comes from; exactly one field is set.
type VolumeSource struct {
	// ContainerDisk is a disk image shipped in a container image (a qcow2 or raw file under /disk).
	// The guest writes to a copy-on-write overlay; the image is never modified.
	// +optional
	ContainerDisk *ContainerDiskSource `json:"containerDisk,omitempty"`
	// PersistentVolumeClaim is a disk image on a PVC; its data survives restarts.
	// +optional
	PersistentVolumeClaim *PersistentVolumeClaimVolumeSource `json:"persistentVolumeClaim,omitempty"`
	// CloudInitNoCloud is a NoCloud seed (volume label cidata) made from the given data.
	// +optional
	CloudInitNoCloud *CloudInitNoCloudSource `json:"cloudInitNoCloud,omitempty"`
	// EmptyDisk is a new sparse disk that lives as long as the instance.
	// +optional
	EmptyDisk *EmptyDiskSource `json:"emptyDisk,omitempty"`
}

// ContainerDiskSource is a disk image in a container image.
type ContainerDiskSource struct {
	// Image is the container image holding the disk.
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`
	// ImagePullSecret names a Secret for pulling the image.
	// +optional
	ImagePullSecret string `json:"imagePullSecret,omitempty"`
	// Path of the disk image in the container image; defaults to the single file under /disk.
	// +optional
	Path string `json:"path,omitempty"`
	// ImagePullPolicy of the image.
	// +optional
	// +kubebuilder:validation:Enum=Always;Never;IfNotPresent
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
}

// PersistentVolumeClaimVolumeSource is a disk on a PersistentVolumeClaim.
type PersistentVolumeClaimVolumeSource struct {
	// ClaimName is the PVC's name in the instance's namespace.
	// +kubebuilder:validation:MinLength=1
	ClaimName string `json:"claimName"`
	// ReadOnly attaches the claim read-only.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`
	// Hotpluggable marks a volume that may be attached to a running guest.
	// +optional
	Hotpluggable bool `json:"hotpluggable,omitempty"`
}

// CloudInitNoCloudSource is the data of a cloud-init NoCloud seed.
//
// +kubebuilder:validation:XValidation:rule="[has(self.userData), has(self.userDataBase64), has(self.secretRef)].filter(x, x).size() <= 1",message="set at most one of userData, userDataBase64, secretRef"
// +kubebuilder:validation:XValidation:rule="[has(self.networkData), has(self.networkDataBase64), has(self.networkDataSecretRef)].filter(x, x).size() <= 1",message="set at most one of networkData, networkDataBase64, networkDataSecretRef"
type CloudInitNoCloudSource struct {
	// UserData is the user-data as text.
	// +optional
	UserData string `json:"userData,omitempty"`
	// UserDataBase64 is the user-data, base64-encoded.
	// +optional
	// +kubebuilder:validation:Format=byte
	UserDataBase64 string `json:"userDataBase64,omitempty"`
	// SecretRef names a Secret whose key "userdata" (or "userData") holds the user-data.
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`
	// NetworkData is the network-config as text.
	// +optional
	NetworkData string `json:"networkData,omitempty"`
	// NetworkDataBase64 is the network-config, base64-encoded.
	// +optional
	// +kubebuilder:validation:Format=byte
	NetworkDataBase64 string `json:"networkDataBase64,omitempty"`
	// NetworkDataSecretRef names a Secret whose key "networkdata" holds the network-config.
	// +optional
	NetworkDataSecretRef *corev1.LocalObjectReference `json:"networkDataSecretRef,omitempty"`
}

// EmptyDiskSource is a new sparse disk of the given size.
type EmptyDiskSource struct {
	// Capacity of the disk.
	Capacity resource.Quantity `json:"capacity"`
}

// Network is a network the guest's interfaces attach to.
//
// +kubebuilder:validation:XValidation:rule="has(self.pod)",message="a network must set pod (the only network source supported)"
type Network struct {
	// Name the interfaces refer to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	NetworkSource `json:",inline"`
}

// NetworkSource is where a network comes from.
type NetworkSource struct {
	// Pod is the Pod's own network.
	// +optional
	Pod *PodNetwork `json:"pod,omitempty"`
}

// PodNetwork is the Pod's own network.
type PodNetwork struct {
	// VMNetworkCIDR is the guest-side IPv4 network used with masquerade.
	// +optional
	VMNetworkCIDR string `json:"vmNetworkCIDR,omitempty"`
	// VMIPv6NetworkCIDR is the guest-side IPv6 network used with masquerade.
	// +optional
	VMIPv6NetworkCIDR string `json:"vmIPv6NetworkCIDR,omitempty"`
}
