package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// VirtualMachine is a stateful virtual machine: it keeps a VirtualMachineInstance running (or not)
// according to its run strategy, across restarts and node failures.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=vm;vms,categories=all
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=".status.printableStatus",description="Human readable status"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type=='Ready')].status"
type VirtualMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VirtualMachineSpec   `json:"spec"`
	Status VirtualMachineStatus `json:"status,omitempty"`
}

// VirtualMachineList is a list of VirtualMachines.
//
// +kubebuilder:object:root=true
type VirtualMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachine `json:"items"`
}

// VirtualMachineSpec describes how the VirtualMachine's instance is created and kept.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.running) && has(self.runStrategy))",message="spec.running and spec.runStrategy are mutually exclusive: set only spec.runStrategy"
type VirtualMachineSpec struct {
	// Running is the deprecated switch: true means runStrategy Always, false means Halted.
	// Mutually exclusive with runStrategy.
	// +optional
	Running *bool `json:"running,omitempty"`

	// RunStrategy says when an instance should exist. Mutually exclusive with running.
	// +optional
	RunStrategy *VirtualMachineRunStrategy `json:"runStrategy,omitempty"`

	// Instancetype picks an instance type that fills in the template's resources.
	// +optional
	Instancetype *InstancetypeMatcher `json:"instancetype,omitempty"`

	// Preference picks a preference that fills in defaults of the template.
	// +optional
	Preference *PreferenceMatcher `json:"preference,omitempty"`

	// Template is the VirtualMachineInstance created from this VirtualMachine. Changes apply at the
	// next start (update strategy OnDelete).
	Template *VirtualMachineInstanceTemplateSpec `json:"template"`

	// DataVolumeTemplates are DataVolumes created for, and deleted with, this VirtualMachine.
	// +optional
	DataVolumeTemplates []DataVolumeTemplateSpec `json:"dataVolumeTemplates,omitempty"`

	// UpdateVolumesStrategy says how a change of the volumes reaches a running instance.
	// +optional
	UpdateVolumesStrategy *UpdateVolumesStrategy `json:"updateVolumesStrategy,omitempty"`
}

// UpdateVolumesStrategy says how a change of a VirtualMachine's volumes reaches its running instance.
//
// +kubebuilder:validation:Enum=Migration;Replacement
type UpdateVolumesStrategy string

// Volume update strategies.
const (
	// UpdateVolumesStrategyMigration copies the data to the new volumes with a storage migration.
	UpdateVolumesStrategyMigration UpdateVolumesStrategy = "Migration"
	// UpdateVolumesStrategyReplacement applies the new volumes at the next restart.
	UpdateVolumesStrategyReplacement UpdateVolumesStrategy = "Replacement"
)

// EffectiveRunStrategy is spec.runStrategy, or the deprecated spec.running mapped to Always (true)
// or Halted (false or unset).
func (s *VirtualMachineSpec) EffectiveRunStrategy() VirtualMachineRunStrategy {
	if s.RunStrategy != nil {
		return *s.RunStrategy
	}
	if s.Running != nil && *s.Running {
		return RunStrategyAlways
	}
	return RunStrategyHalted
}

// VirtualMachineRunStrategy says when a VirtualMachine should have a running instance.
//
// +kubebuilder:validation:Enum=Always;RerunOnFailure;Manual;Halted;Once;WaitAsReceiver
type VirtualMachineRunStrategy string

const (
	// RunStrategyAlways keeps an instance running: a finished instance is recreated.
	RunStrategyAlways VirtualMachineRunStrategy = "Always"
	// RunStrategyRerunOnFailure recreates the instance only after it failed, not after a guest shutdown.
	RunStrategyRerunOnFailure VirtualMachineRunStrategy = "RerunOnFailure"
	// RunStrategyManual acts only on start and stop requests.
	RunStrategyManual VirtualMachineRunStrategy = "Manual"
	// RunStrategyHalted ensures no instance exists.
	RunStrategyHalted VirtualMachineRunStrategy = "Halted"
	// RunStrategyOnce creates an instance once and never recreates it.
	RunStrategyOnce VirtualMachineRunStrategy = "Once"
	// RunStrategyWaitAsReceiver waits for an incoming migration (KubeVirt's decentralized migration).
	RunStrategyWaitAsReceiver VirtualMachineRunStrategy = "WaitAsReceiver"
)

// VirtualMachineInstanceTemplateSpec is the metadata and spec of the instance a VirtualMachine or a
// VirtualMachineInstanceReplicaSet creates.
type VirtualMachineInstanceTemplateSpec struct {
	// Metadata of the instances; unknown fields (e.g. creationTimestamp: null from generated YAML) are
	// kept, as KubeVirt keeps them.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +nullable
	ObjectMeta metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec VirtualMachineInstanceSpec `json:"spec,omitempty"`
}

// VirtualMachineStatus is the observed state of a VirtualMachine.
type VirtualMachineStatus struct {
	// SnapshotInProgress names the VirtualMachineSnapshot being taken.
	// +optional
	SnapshotInProgress *string `json:"snapshotInProgress,omitempty"`
	// RestoreInProgress names the VirtualMachineRestore being applied.
	// +optional
	RestoreInProgress *string `json:"restoreInProgress,omitempty"`
	// Created is true when an instance of this VirtualMachine exists.
	// +optional
	Created bool `json:"created,omitempty"`
	// Ready is true when the instance exists and is ready.
	// +optional
	Ready bool `json:"ready,omitempty"`
	// PrintableStatus is a one-word summary for humans (kubectl get vm).
	// +optional
	PrintableStatus VirtualMachinePrintableStatus `json:"printableStatus,omitempty"`
	// Conditions: Ready, Failure, Paused, RestartRequired, Stopped.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// StateChangeRequests are pending start/stop requests; the controller acts on the first only and
	// removes it when done.
	// +optional
	StateChangeRequests []VirtualMachineStateChangeRequest `json:"stateChangeRequests,omitempty"`
	// VolumeRequests are pending volume hotplug and unplug requests.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	VolumeRequests []VirtualMachineVolumeRequest `json:"volumeRequests,omitempty"`
	// VolumeSnapshotStatuses say, per volume, whether it can be snapshotted.
	// +optional
	VolumeSnapshotStatuses []VolumeSnapshotStatus `json:"volumeSnapshotStatuses,omitempty"`
	// StartFailure records consecutive start failures and the crash-loop backoff.
	// +optional
	// +nullable
	StartFailure *VirtualMachineStartFailure `json:"startFailure,omitempty"`
	// MemoryDumpRequest is the state of a memory dump to a PVC.
	// +optional
	// +nullable
	MemoryDumpRequest *VirtualMachineMemoryDumpRequest `json:"memoryDumpRequest,omitempty"`
	// RunStrategy is the run strategy the controller last applied.
	// +optional
	RunStrategy VirtualMachineRunStrategy `json:"runStrategy,omitempty"`
	// ObservedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// DesiredGeneration is the metadata.generation the controller is working towards.
	// +optional
	DesiredGeneration int64 `json:"desiredGeneration,omitempty"`
	// VolumeUpdateState tracks a change of the volumes applied with updateVolumesStrategy.
	// +optional
	VolumeUpdateState *VolumeUpdateState `json:"volumeUpdateState,omitempty"`
	// ChangedBlockTracking is the state of changed block tracking.
	// +optional
	// +nullable
	ChangedBlockTracking *ChangedBlockTrackingStatus `json:"changedBlockTracking,omitempty"`
	// InstancetypeRef records the instance type in use.
	// +optional
	// +nullable
	InstancetypeRef *InstancetypeStatusRef `json:"instancetypeRef,omitempty"`
	// PreferenceRef records the preference in use.
	// +optional
	// +nullable
	PreferenceRef *InstancetypeStatusRef `json:"preferenceRef,omitempty"`
}

// VirtualMachinePrintableStatus is the summary kubectl prints in the STATUS column.
type VirtualMachinePrintableStatus string

// Printable statuses, listed in the priority order in which they are computed (first match wins).
const (
	VirtualMachineStatusTerminating             VirtualMachinePrintableStatus = "Terminating"
	VirtualMachineStatusStopping                VirtualMachinePrintableStatus = "Stopping"
	VirtualMachineStatusMigrating               VirtualMachinePrintableStatus = "Migrating"
	VirtualMachineStatusPaused                  VirtualMachinePrintableStatus = "Paused"
	VirtualMachineStatusRunning                 VirtualMachinePrintableStatus = "Running"
	VirtualMachineStatusPvcNotFound             VirtualMachinePrintableStatus = "ErrorPvcNotFound"
	VirtualMachineStatusDataVolumeError         VirtualMachinePrintableStatus = "DataVolumeError"
	VirtualMachineStatusUnschedulable           VirtualMachinePrintableStatus = "ErrorUnschedulable"
	VirtualMachineStatusProvisioning            VirtualMachinePrintableStatus = "Provisioning"
	VirtualMachineStatusWaitingForVolumeBinding VirtualMachinePrintableStatus = "WaitingForVolumeBinding"
	VirtualMachineStatusErrImagePull            VirtualMachinePrintableStatus = "ErrImagePull"
	VirtualMachineStatusImagePullBackOff        VirtualMachinePrintableStatus = "ImagePullBackOff"
	VirtualMachineStatusStarting                VirtualMachinePrintableStatus = "Starting"
	VirtualMachineStatusCrashLoopBackOff        VirtualMachinePrintableStatus = "CrashLoopBackOff"
	VirtualMachineStatusStopped                 VirtualMachinePrintableStatus = "Stopped"
	VirtualMachineStatusWaitingForReceiver      VirtualMachinePrintableStatus = "WaitingForReceiver"
	VirtualMachineStatusUnknown                 VirtualMachinePrintableStatus = "Unknown"
)

// VirtualMachine condition types.
const (
	// VirtualMachineReady mirrors the instance's Ready condition.
	VirtualMachineReady = "Ready"
	// VirtualMachineFailure reports an error the controller hit while acting on the VirtualMachine.
	VirtualMachineFailure = "Failure"
	// VirtualMachinePaused mirrors the instance's Paused condition.
	VirtualMachinePaused = "Paused"
	// VirtualMachineRestartRequired says the template changed while an instance runs; the change
	// applies at the next start.
	VirtualMachineRestartRequired = "RestartRequired"
	// VirtualMachineStopped says plainly whether the VirtualMachine is stopped, and in its reason why.
	VirtualMachineStopped = "Stopped"
)

// StateChangeRequestAction is the action of a start or stop request.
//
// +kubebuilder:validation:Enum=Start;Stop
type StateChangeRequestAction string

const (
	// StartRequest asks for a new instance.
	StartRequest StateChangeRequestAction = "Start"
	// StopRequest asks for the instance with the given UID (or the current one) to be stopped.
	StopRequest StateChangeRequestAction = "Stop"
)

// StartRequestDataPausedKey set to StartRequestDataPausedTrue in a Start request's data asks for the
// new instance to start paused (KubeVirt's key and value).
const (
	StartRequestDataPausedKey  = "paused"
	StartRequestDataPausedTrue = "true"
)

// VirtualMachineStateChangeRequest is a pending start or stop request.
type VirtualMachineStateChangeRequest struct {
	// Action is Start or Stop.
	Action StateChangeRequestAction `json:"action"`
	// Data carries request parameters.
	// +optional
	Data map[string]string `json:"data,omitempty"`
	// UID of the instance a Stop request is meant for.
	// +optional
	UID *types.UID `json:"uid,omitempty"`
}

// VirtualMachineStartFailure records consecutive failures to start and when to retry.
type VirtualMachineStartFailure struct {
	// LastFailedVMIUID is the UID of the instance that failed last.
	// +optional
	LastFailedVMIUID types.UID `json:"lastFailedVMIUID,omitempty"`
	// RetryAfterTimestamp is when the next start is allowed.
	// +optional
	RetryAfterTimestamp *metav1.Time `json:"retryAfterTimestamp,omitempty"`
	// ConsecutiveFailCount counts instances that failed before ever running.
	// +optional
	ConsecutiveFailCount int `json:"consecutiveFailCount,omitempty"`
}
