package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// VolumeStatus is the state of one of the instance's volumes.
type VolumeStatus struct {
	// Name of the volume.
	Name string `json:"name"`
	// Target is the guest device name the volume got (e.g. vda).
	Target string `json:"target"`
	// Phase of the volume.
	// +optional
	Phase VolumePhase `json:"phase,omitempty"`
	// Reason is a short CamelCase reason for the phase.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message explains the phase.
	// +optional
	Message string `json:"message,omitempty"`
	// PersistentVolumeClaimInfo is what the node needs to know about the volume's claim.
	// +optional
	PersistentVolumeClaimInfo *PersistentVolumeClaimInfo `json:"persistentVolumeClaimInfo,omitempty"`
	// HotplugVolume is set for a hotplugged volume.
	// +optional
	HotplugVolume *HotplugVolumeStatus `json:"hotplugVolume,omitempty"`
	// Size of the volume in bytes.
	// +optional
	Size int64 `json:"size,omitempty"`
	// MemoryDumpVolume is set for a memory dump volume.
	// +optional
	MemoryDumpVolume *DomainMemoryDumpInfo `json:"memoryDumpVolume,omitempty"`
	// ContainerDiskVolume is set for a container disk.
	// +optional
	ContainerDiskVolume *ContainerDiskInfo `json:"containerDiskVolume,omitempty"`
}

// VolumePhase is where a volume is on its way into the guest.
type VolumePhase string

// Volume phases.
const (
	VolumePending               VolumePhase = "Pending"
	VolumeBound                 VolumePhase = "Bound"
	HotplugVolumeAttachedToNode VolumePhase = "AttachedToNode"
	HotplugVolumeMounted        VolumePhase = "MountedToPod"
	VolumeReady                 VolumePhase = "Ready"
	HotplugVolumeDetaching      VolumePhase = "Detaching"
	HotplugVolumeUnMounted      VolumePhase = "UnMountedFromPod"
	MemoryDumpVolumeCompleted   VolumePhase = "MemoryDumpCompleted"
	MemoryDumpVolumeInProgress  VolumePhase = "MemoryDumpInProgress"
	MemoryDumpVolumeFailed      VolumePhase = "MemoryDumpFailed"
)

// PersistentVolumeClaimInfo is what the node needs to know about a volume's claim.
type PersistentVolumeClaimInfo struct {
	// ClaimName of the PVC.
	// +optional
	ClaimName string `json:"claimName,omitempty"`
	// AccessModes of the PVC.
	// +optional
	// +listType=atomic
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`
	// VolumeMode of the PVC.
	// +optional
	VolumeMode *corev1.PersistentVolumeMode `json:"volumeMode,omitempty"`
	// Capacity from the PVC's status.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Requests from the PVC's spec.
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
	// Preallocated says the PVC's storage was allocated up front.
	// +optional
	Preallocated bool `json:"preallocated,omitempty"`
	// FilesystemOverhead is the share of a filesystem PVC kept free when sizing the image.
	// +optional
	FilesystemOverhead *Percent `json:"filesystemOverhead,omitempty"`
}

// Percent is a fraction from 0 to 1 written as a string with up to three decimals.
//
// +kubebuilder:validation:Pattern=`^(0(?:\.\d{1,3})?|1)$`
type Percent string

// HotplugVolumeStatus names the Pod that attaches a hotplugged volume to the node.
type HotplugVolumeStatus struct {
	// AttachPodName is the attachment Pod's name.
	// +optional
	AttachPodName string `json:"attachPodName,omitempty"`
	// AttachPodUID is the attachment Pod's UID.
	// +optional
	AttachPodUID types.UID `json:"attachPodUID,omitempty"`
}

// DomainMemoryDumpInfo describes a memory dump written to a volume.
type DomainMemoryDumpInfo struct {
	// StartTimestamp is when the dump started.
	// +optional
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// EndTimestamp is when the dump finished.
	// +optional
	EndTimestamp *metav1.Time `json:"endTimestamp,omitempty"`
	// ClaimName is the PVC the dump went to.
	// +optional
	ClaimName string `json:"claimName,omitempty"`
	// TargetFileName is the dump's file name.
	// +optional
	TargetFileName string `json:"targetFileName,omitempty"`
}

// ContainerDiskInfo describes a container disk.
type ContainerDiskInfo struct {
	// Checksum of the disk image (deprecated in KubeVirt).
	// +optional
	// +kubebuilder:validation:Format=int64
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967295
	Checksum uint32 `json:"checksum,omitempty"`
}

// KernelBootStatus describes the artifacts of the kernel boot container.
type KernelBootStatus struct {
	// KernelInfo describes the kernel image.
	// +optional
	KernelInfo *KernelInfo `json:"kernelInfo,omitempty"`
	// InitrdInfo describes the initrd.
	// +optional
	InitrdInfo *InitrdInfo `json:"initrdInfo,omitempty"`
}

// KernelInfo describes a kernel image.
type KernelInfo struct {
	// Checksum of the kernel image (deprecated in KubeVirt).
	// +optional
	// +kubebuilder:validation:Format=int64
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967295
	Checksum uint32 `json:"checksum,omitempty"`
}

// InitrdInfo describes an initrd.
type InitrdInfo struct {
	// Checksum of the initrd (deprecated in KubeVirt).
	// +optional
	// +kubebuilder:validation:Format=int64
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967295
	Checksum uint32 `json:"checksum,omitempty"`
}

// StorageMigratedVolumeInfo pairs the source and destination claims of a migrated volume.
type StorageMigratedVolumeInfo struct {
	// VolumeName is the volume being migrated.
	VolumeName string `json:"volumeName"`
	// SourcePVCInfo describes the source claim.
	// +optional
	SourcePVCInfo *PersistentVolumeClaimInfo `json:"sourcePVCInfo,omitempty"`
	// DestinationPVCInfo describes the destination claim.
	// +optional
	DestinationPVCInfo *PersistentVolumeClaimInfo `json:"destinationPVCInfo,omitempty"`
}

// ChangedBlockTrackingState is the state of changed block tracking of a machine.
type ChangedBlockTrackingState string

// Changed block tracking states.
const (
	ChangedBlockTrackingPendingRestart ChangedBlockTrackingState = "PendingRestart"
	ChangedBlockTrackingInitializing   ChangedBlockTrackingState = "Initializing"
	ChangedBlockTrackingEnabled        ChangedBlockTrackingState = "Enabled"
	ChangedBlockTrackingDisabled       ChangedBlockTrackingState = "Disabled"
	ChangedBlockTrackingFGDisabled     ChangedBlockTrackingState = "IncrementalBackupFeatureGateDisabled"
)

// ChangedBlockTrackingStatus is the state of changed block tracking and of the last backup.
type ChangedBlockTrackingStatus struct {
	// State of changed block tracking.
	State ChangedBlockTrackingState `json:"state"`
	// BackupStatus describes the last backup.
	// +optional
	// +nullable
	BackupStatus *VirtualMachineInstanceBackupStatus `json:"backupStatus,omitempty"`
}

// VirtualMachineInstanceBackupStatus describes a backup of the instance.
type VirtualMachineInstanceBackupStatus struct {
	// BackupName is the backup's name.
	// +optional
	BackupName string `json:"backupName,omitempty"`
	// StartTimestamp is when the backup started.
	// +optional
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// EndTimestamp is when the backup ended.
	// +optional
	EndTimestamp *metav1.Time `json:"endTimestamp,omitempty"`
	// Completed says the backup finished.
	// +optional
	Completed bool `json:"completed,omitempty"`
	// Failed says the backup failed.
	// +optional
	Failed bool `json:"failed,omitempty"`
	// BackupMsg explains the outcome (e.g. a failure reason).
	// +optional
	BackupMsg *string `json:"backupMsg,omitempty"`
	// CheckpointName is the checkpoint the backup created.
	// +optional
	CheckpointName *string `json:"checkpointName,omitempty"`
	// Volumes included in the backup.
	// +optional
	// +listType=atomic
	Volumes []VirtualMachineInstanceBackupVolumeInfo `json:"volumes,omitempty"`
	// QuiesceStatus says whether freezing the guest filesystems succeeded, failed or was skipped.
	// +optional
	QuiesceStatus string `json:"quiesceStatus,omitempty"`
}

// VirtualMachineInstanceBackupVolumeInfo names a volume included in a backup.
type VirtualMachineInstanceBackupVolumeInfo struct {
	// VolumeName is the volume's name in the instance spec.
	VolumeName string `json:"volumeName"`
}
