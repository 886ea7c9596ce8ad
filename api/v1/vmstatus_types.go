package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VirtualMachineVolumeRequest is a pending hotplug or unplug of a volume; one field is set.
type VirtualMachineVolumeRequest struct {
	// AddVolumeOptions asks for a volume to be added.
	// +optional
	AddVolumeOptions *AddVolumeOptions `json:"addVolumeOptions,omitempty"`
	// RemoveVolumeOptions asks for a volume to be removed.
	// +optional
	RemoveVolumeOptions *RemoveVolumeOptions `json:"removeVolumeOptions,omitempty"`
}

// AddVolumeOptions describes a volume and disk to hotplug.
type AddVolumeOptions struct {
	// Name of the volume and its disk.
	Name string `json:"name"`
	// Disk to add to the guest.
	Disk *Disk `json:"disk"`
	// VolumeSource of the new volume.
	VolumeSource *HotplugVolumeSource `json:"volumeSource"`
	// DryRun, when "All", validates the request without applying it.
	// +optional
	// +listType=atomic
	DryRun []string `json:"dryRun,omitempty"`
}

// RemoveVolumeOptions names a hotplugged volume and disk to remove.
type RemoveVolumeOptions struct {
	// Name of the volume and its disk.
	Name string `json:"name"`
	// DryRun, when "All", validates the request without applying it.
	// +optional
	// +listType=atomic
	DryRun []string `json:"dryRun,omitempty"`
}

// VolumeSnapshotStatus says whether a volume can be snapshotted.
type VolumeSnapshotStatus struct {
	// Name of the volume.
	Name string `json:"name"`
	// Enabled is true when the volume can be snapshotted.
	Enabled bool `json:"enabled"`
	// Reason it cannot, when Enabled is false.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// MemoryDumpPhase is where a memory dump request is.
type MemoryDumpPhase string

// Memory dump phases.
const (
	MemoryDumpAssociating  MemoryDumpPhase = "Associating"
	MemoryDumpInProgress   MemoryDumpPhase = "InProgress"
	MemoryDumpUnmounting   MemoryDumpPhase = "Unmounting"
	MemoryDumpCompleted    MemoryDumpPhase = "Completed"
	MemoryDumpDissociating MemoryDumpPhase = "Dissociating"
	MemoryDumpFailed       MemoryDumpPhase = "Failed"
)

// VirtualMachineMemoryDumpRequest is the state of a dump of the guest memory to a PVC.
type VirtualMachineMemoryDumpRequest struct {
	// ClaimName is the PVC that receives the dump.
	ClaimName string `json:"claimName"`
	// Phase of the dump.
	Phase MemoryDumpPhase `json:"phase"`
	// Remove asks for the PVC to be detached from the VirtualMachine.
	// +optional
	Remove bool `json:"remove,omitempty"`
	// StartTimestamp is when the dump started.
	// +optional
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// EndTimestamp is when the dump finished.
	// +optional
	EndTimestamp *metav1.Time `json:"endTimestamp,omitempty"`
	// FileName of the dump on the PVC.
	// +optional
	FileName *string `json:"fileName,omitempty"`
	// Message explains a failure.
	// +optional
	Message string `json:"message,omitempty"`
}

// VolumeUpdateState tracks a change of the volumes of a running VirtualMachine.
type VolumeUpdateState struct {
	// VolumeMigrationState is set while volumes are migrated.
	// +optional
	VolumeMigrationState *VolumeMigrationState `json:"volumeMigrationState,omitempty"`
}

// VolumeMigrationState lists the volumes of a storage migration.
type VolumeMigrationState struct {
	// MigratedVolumes pairs source and destination claims.
	// +optional
	// +listType=atomic
	MigratedVolumes []StorageMigratedVolumeInfo `json:"migratedVolumes,omitempty"`
}
