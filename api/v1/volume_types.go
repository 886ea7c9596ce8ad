package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Volume is a named source of disk data.
//
// +kubebuilder:validation:XValidation:rule="[has(self.containerDisk), has(self.persistentVolumeClaim), has(self.cloudInitNoCloud), has(self.emptyDisk), has(self.hostDisk), has(self.cloudInitConfigDrive), has(self.sysprep), has(self.ephemeral), has(self.dataVolume), has(self.configMap), has(self.secret), has(self.downwardAPI), has(self.serviceAccount), has(self.downwardMetrics), has(self.memoryDump), has(self.containerPath)].filter(x, x).size() == 1",message="a volume must set exactly one of containerDisk, persistentVolumeClaim, cloudInitNoCloud, emptyDisk, hostDisk, cloudInitConfigDrive, sysprep, ephemeral, dataVolume, configMap, secret, downwardAPI, serviceAccount, downwardMetrics, memoryDump, containerPath"
type Volume struct {
	// Name the disks refer to: a DNS-1123 label (it names files and devices on the node).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	VolumeSource `json:",inline"`
}

// VolumeSource is where a volume's data comes from; exactly one field is set.
type VolumeSource struct {
	// HostDisk is a disk image file on the node.
	// +optional
	HostDisk *HostDisk `json:"hostDisk,omitempty"`
	// PersistentVolumeClaim is a disk image on a PVC; its data survives restarts.
	// +optional
	PersistentVolumeClaim *PersistentVolumeClaimVolumeSource `json:"persistentVolumeClaim,omitempty"`
	// CloudInitNoCloud is a NoCloud seed (volume label cidata) made from the given data.
	// +optional
	CloudInitNoCloud *CloudInitNoCloudSource `json:"cloudInitNoCloud,omitempty"`
	// CloudInitConfigDrive is a cloud-init config drive (volume label config-2) made from the given data.
	// +optional
	CloudInitConfigDrive *CloudInitConfigDriveSource `json:"cloudInitConfigDrive,omitempty"`
	// Sysprep is a Windows answer file from a ConfigMap or Secret.
	// +optional
	Sysprep *SysprepSource `json:"sysprep,omitempty"`
	// ContainerDisk is a disk image shipped in a container image (a qcow2 or raw file under /disk).
	// The guest writes to a copy-on-write overlay; the image is never modified.
	// +optional
	ContainerDisk *ContainerDiskSource `json:"containerDisk,omitempty"`
	// Ephemeral puts a throw-away copy-on-write layer over a PVC.
	// +optional
	Ephemeral *EphemeralVolumeSource `json:"ephemeral,omitempty"`
	// EmptyDisk is a new sparse disk that lives as long as the instance.
	// +optional
	EmptyDisk *EmptyDiskSource `json:"emptyDisk,omitempty"`
	// DataVolume is the PVC of a CDI DataVolume with the same name.
	// +optional
	DataVolume *DataVolumeSource `json:"dataVolume,omitempty"`
	// ConfigMap is a ConfigMap presented as a disk.
	// +optional
	ConfigMap *ConfigMapVolumeSource `json:"configMap,omitempty"`
	// Secret is a Secret presented as a disk.
	// +optional
	Secret *SecretVolumeSource `json:"secret,omitempty"`
	// DownwardAPI is Pod metadata presented as a disk.
	// +optional
	DownwardAPI *DownwardAPIVolumeSource `json:"downwardAPI,omitempty"`
	// ServiceAccount is a ServiceAccount token presented as a disk; at most one per instance.
	// +optional
	ServiceAccount *ServiceAccountVolumeSource `json:"serviceAccount,omitempty"`
	// DownwardMetrics is a small disk with host and guest metrics in vhostmd format.
	// +optional
	DownwardMetrics *DownwardMetricsVolumeSource `json:"downwardMetrics,omitempty"`
	// MemoryDump is a PVC that receives a dump of the guest memory.
	// +optional
	MemoryDump *MemoryDumpVolumeSource `json:"memoryDump,omitempty"`
	// ContainerPath shares a path of the launcher's compute container with the guest over virtiofs.
	// +optional
	ContainerPath *ContainerPathVolumeSource `json:"containerPath,omitempty"`
}

// HotplugVolumeSource is the source of a volume added to a running guest; exactly one field is set.
type HotplugVolumeSource struct {
	// PersistentVolumeClaim to attach.
	// +optional
	PersistentVolumeClaim *PersistentVolumeClaimVolumeSource `json:"persistentVolumeClaim,omitempty"`
	// DataVolume whose PVC to attach.
	// +optional
	DataVolume *DataVolumeSource `json:"dataVolume,omitempty"`
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

// PersistentVolumeClaimVolumeSource is a disk on a PersistentVolumeClaim (the fields of the core
// PersistentVolumeClaimVolumeSource plus hotpluggable).
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

// EphemeralVolumeSource wraps a PVC in a copy-on-write layer that is dropped with the instance.
type EphemeralVolumeSource struct {
	// PersistentVolumeClaim is the read-only base of the layer.
	// +optional
	PersistentVolumeClaim *corev1.PersistentVolumeClaimVolumeSource `json:"persistentVolumeClaim,omitempty"`
}

// MemoryDumpVolumeSource is the PVC a memory dump is written to.
type MemoryDumpVolumeSource struct {
	PersistentVolumeClaimVolumeSource `json:",inline"`
}

// DataVolumeSource names a DataVolume (and its PVC) in the instance's namespace.
type DataVolumeSource struct {
	// Name of the DataVolume and of its PVC.
	Name string `json:"name"`
	// Hotpluggable marks a volume that may be attached to a running guest.
	// +optional
	Hotpluggable bool `json:"hotpluggable,omitempty"`
}

// HostDiskType says whether a host disk image must already exist.
//
// +kubebuilder:validation:Enum=Disk;DiskOrCreate
type HostDiskType string

// Host disk types.
const (
	// HostDiskExists requires the image to exist at the path.
	HostDiskExists HostDiskType = "Disk"
	// HostDiskExistsOrCreate creates a sparse image at the path when there is none.
	HostDiskExistsOrCreate HostDiskType = "DiskOrCreate"
)

// HostDisk is a disk image file on the node's filesystem.
type HostDisk struct {
	// Path of the image file on the node.
	Path string `json:"path"`
	// Type is Disk (must exist) or DiskOrCreate.
	Type HostDiskType `json:"type"`
	// Capacity of the image created for DiskOrCreate.
	// +optional
	Capacity resource.Quantity `json:"capacity,omitempty"`
	// Shared says the path is on storage shared between nodes.
	// +optional
	Shared *bool `json:"shared,omitempty"`
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

// CloudInitConfigDriveSource is the data of a cloud-init config drive.
type CloudInitConfigDriveSource struct {
	// UserData is the user-data as text.
	// +optional
	UserData string `json:"userData,omitempty"`
	// UserDataBase64 is the user-data, base64-encoded.
	// +optional
	UserDataBase64 string `json:"userDataBase64,omitempty"`
	// SecretRef names a Secret that holds the user-data.
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`
	// NetworkData is the network data as text.
	// +optional
	NetworkData string `json:"networkData,omitempty"`
	// NetworkDataBase64 is the network data, base64-encoded.
	// +optional
	NetworkDataBase64 string `json:"networkDataBase64,omitempty"`
	// NetworkDataSecretRef names a Secret that holds the network data.
	// +optional
	NetworkDataSecretRef *corev1.LocalObjectReference `json:"networkDataSecretRef,omitempty"`
}

// SysprepSource is a Windows answer file (autounattend.xml) attached as a CD-ROM.
type SysprepSource struct {
	// Secret holding the answer file.
	// +optional
	Secret *corev1.LocalObjectReference `json:"secret,omitempty"`
	// ConfigMap holding the answer file.
	// +optional
	ConfigMap *corev1.LocalObjectReference `json:"configMap,omitempty"`
}

// EmptyDiskSource is a new sparse disk of the given size.
type EmptyDiskSource struct {
	// Capacity of the disk.
	Capacity resource.Quantity `json:"capacity"`
}

// ConfigMapVolumeSource presents a ConfigMap as a disk.
type ConfigMapVolumeSource struct {
	corev1.LocalObjectReference `json:",inline"`
	// Optional allows the ConfigMap or its keys to be missing.
	// +optional
	Optional *bool `json:"optional,omitempty"`
	// VolumeLabel is the filesystem label of the disk seen by the guest.
	// +optional
	VolumeLabel string `json:"volumeLabel,omitempty"`
}

// SecretVolumeSource presents a Secret as a disk.
type SecretVolumeSource struct {
	// SecretName is the Secret in the instance's namespace.
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// Optional allows the Secret or its keys to be missing.
	// +optional
	Optional *bool `json:"optional,omitempty"`
	// VolumeLabel is the filesystem label of the disk seen by the guest.
	// +optional
	VolumeLabel string `json:"volumeLabel,omitempty"`
}

// DownwardAPIVolumeSource presents Pod fields as files on a disk.
type DownwardAPIVolumeSource struct {
	// Fields are the files to write.
	// +optional
	Fields []corev1.DownwardAPIVolumeFile `json:"fields,omitempty"`
	// VolumeLabel is the filesystem label of the disk seen by the guest.
	// +optional
	VolumeLabel string `json:"volumeLabel,omitempty"`
}

// ServiceAccountVolumeSource presents a ServiceAccount's token as a disk.
type ServiceAccountVolumeSource struct {
	// ServiceAccountName is the ServiceAccount in the instance's namespace.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// DownwardMetricsVolumeSource is a small disk with metrics in vhostmd format; it has no settings.
type DownwardMetricsVolumeSource struct{}

// ContainerPathVolumeSource shares a path of the launcher's compute container (a volume mount of it)
// with the guest over virtiofs.
type ContainerPathVolumeSource struct {
	// Path is the absolute path in the compute container.
	// +kubebuilder:validation:MaxLength=4096
	Path string `json:"path"`
	// ReadOnly shares the path read-only; KubeVirt supports only true.
	// +optional
	ReadOnly *bool `json:"readOnly,omitempty"`
}

// UtilityVolumeType is what a utility volume is for.
type UtilityVolumeType string

// Utility volume types.
const (
	// UtilityVolumeMemoryDump receives a memory dump.
	UtilityVolumeMemoryDump UtilityVolumeType = "MemoryDump"
	// UtilityVolumeBackup receives backup output.
	UtilityVolumeBackup UtilityVolumeType = "Backup"
)

// UtilityVolume is a PVC mounted into the launcher Pod without a disk in the guest.
type UtilityVolume struct {
	// Name, unique among the instance's volumes and utility volumes.
	Name string `json:"name"`

	corev1.PersistentVolumeClaimVolumeSource `json:",inline"`

	// Type of the utility volume.
	// +optional
	Type *UtilityVolumeType `json:"type,omitempty"`
}
