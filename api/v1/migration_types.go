package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VirtualMachineInstanceMigration asks for a running instance to be live-migrated to another node.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=vmim;vmims,categories=all
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="VMI",type=string,JSONPath=".spec.vmiName"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type VirtualMachineInstanceMigration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VirtualMachineInstanceMigrationSpec   `json:"spec"`
	Status VirtualMachineInstanceMigrationStatus `json:"status,omitempty"`
}

// VirtualMachineInstanceMigrationList is a list of migrations.
//
// +kubebuilder:object:root=true
type VirtualMachineInstanceMigrationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineInstanceMigration `json:"items"`
}

// VirtualMachineInstanceMigrationSpec names the instance to migrate.
type VirtualMachineInstanceMigrationSpec struct {
	// VMIName is the instance to migrate, in the migration's namespace.
	// +kubebuilder:validation:MinLength=1
	VMIName string `json:"vmiName"`
}

// MigrationFinalizer keeps a migration until it has ended: deleting a running migration aborts it
// (the guest stays on the source) and only then is the migration removed.
const MigrationFinalizer = "kubevirt.io/migrationJobFinalize"

// MigrationSelectorLabel names the instance a migration moves, as its spec.vmiName: admission sets it
// on create and keeps it, so clients find an instance's migrations by label (KubeVirt's virtctl
// migrate-cancel does).
const MigrationSelectorLabel = "kubevirt.io/vmi-name"

// VirtualMachineInstanceMigrationPhase is where a migration is.
//
// +kubebuilder:validation:Enum=Pending;Scheduling;Scheduled;PreparingTarget;TargetReady;Running;Succeeded;Failed
type VirtualMachineInstanceMigrationPhase string

// Migration phases.
const (
	MigrationPending         VirtualMachineInstanceMigrationPhase = "Pending"
	MigrationScheduling      VirtualMachineInstanceMigrationPhase = "Scheduling"
	MigrationScheduled       VirtualMachineInstanceMigrationPhase = "Scheduled"
	MigrationPreparingTarget VirtualMachineInstanceMigrationPhase = "PreparingTarget"
	MigrationTargetReady     VirtualMachineInstanceMigrationPhase = "TargetReady"
	MigrationRunning         VirtualMachineInstanceMigrationPhase = "Running"
	MigrationSucceeded       VirtualMachineInstanceMigrationPhase = "Succeeded"
	MigrationFailed          VirtualMachineInstanceMigrationPhase = "Failed"
)

// IsFinal reports whether the migration has ended (Succeeded or Failed).
func (p VirtualMachineInstanceMigrationPhase) IsFinal() bool {
	return p == MigrationSucceeded || p == MigrationFailed
}

// VirtualMachineInstanceMigrationStatus is the observed state of a migration.
type VirtualMachineInstanceMigrationStatus struct {
	// +optional
	Phase VirtualMachineInstanceMigrationPhase `json:"phase,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
