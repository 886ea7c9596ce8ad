package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the subresource calls.
const GroupName = "subresources.kubevirt.io"

var (
	// SchemeGroupVersion is the group and version of this package's types.
	SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1"}
	// SchemeBuilder registers this package's types with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&StartOptions{}, &StopOptions{}, &RestartOptions{},
		&PauseOptions{}, &UnpauseOptions{}, &MigrateOptions{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}

// StartOptions is the body of a start call on a VirtualMachine.
//
// +kubebuilder:object:root=true
type StartOptions struct {
	metav1.TypeMeta `json:",inline"`
	// Paused starts the guest paused.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// DryRun: "All" validates without persisting.
	// +optional
	DryRun []string `json:"dryRun,omitempty"`
}

// StopOptions is the body of a stop call on a VirtualMachine.
//
// +kubebuilder:object:root=true
type StopOptions struct {
	metav1.TypeMeta `json:",inline"`
	// GracePeriod overrides the instance's terminationGracePeriodSeconds; 0 forces the stop.
	// +optional
	GracePeriod *int64 `json:"gracePeriod,omitempty"`
	// +optional
	DryRun []string `json:"dryRun,omitempty"`
}

// RestartOptions is the body of a restart call on a VirtualMachine.
//
// +kubebuilder:object:root=true
type RestartOptions struct {
	metav1.TypeMeta `json:",inline"`
	// GracePeriodSeconds overrides the instance's terminationGracePeriodSeconds; 0 forces the stop.
	// +optional
	GracePeriodSeconds *int64 `json:"gracePeriodSeconds,omitempty"`
	// +optional
	DryRun []string `json:"dryRun,omitempty"`
}

// PauseOptions is the body of a pause call on a VirtualMachineInstance.
//
// +kubebuilder:object:root=true
type PauseOptions struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	DryRun []string `json:"dryRun,omitempty"`
}

// UnpauseOptions is the body of an unpause call on a VirtualMachineInstance.
//
// +kubebuilder:object:root=true
type UnpauseOptions struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	DryRun []string `json:"dryRun,omitempty"`
}

// MigrateOptions is the body of a migrate call on a VirtualMachine.
//
// +kubebuilder:object:root=true
type MigrateOptions struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	DryRun []string `json:"dryRun,omitempty"`
	// AddedNodeSelector narrows the nodes the instance may migrate to.
	// +optional
	AddedNodeSelector map[string]string `json:"addedNodeSelector,omitempty"`
}
