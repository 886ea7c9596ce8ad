package v1

// InferFromVolumeFailurePolicy says what happens when an instance type or preference cannot be
// inferred from a volume.
//
// +kubebuilder:validation:Enum=Reject;Ignore
type InferFromVolumeFailurePolicy string

// Inference failure policies.
const (
	// RejectInferFromVolumeFailure rejects the VirtualMachine.
	RejectInferFromVolumeFailure InferFromVolumeFailurePolicy = "Reject"
	// IgnoreInferFromVolumeFailure goes on without an instance type or preference.
	IgnoreInferFromVolumeFailure InferFromVolumeFailurePolicy = "Ignore"
)

// InstancetypeMatcher picks the instance type of a VirtualMachine.
type InstancetypeMatcher struct {
	// Name of the VirtualMachineInstancetype or VirtualMachineClusterInstancetype.
	// +optional
	Name string `json:"name,omitempty"`
	// Kind is VirtualMachineInstancetype or VirtualMachineClusterInstancetype (the default).
	// +optional
	Kind string `json:"kind,omitempty"`
	// RevisionName is the ControllerRevision holding the copy of the instance type in use.
	// +optional
	RevisionName string `json:"revisionName,omitempty"`
	// InferFromVolume names a volume whose source's labels say which instance type to use.
	// +optional
	InferFromVolume string `json:"inferFromVolume,omitempty"`
	// InferFromVolumeFailurePolicy is Reject (the default) or Ignore.
	// +optional
	InferFromVolumeFailurePolicy *InferFromVolumeFailurePolicy `json:"inferFromVolumeFailurePolicy,omitempty"`
}

// PreferenceMatcher picks the preference of a VirtualMachine.
type PreferenceMatcher struct {
	// Name of the VirtualMachinePreference or VirtualMachineClusterPreference.
	// +optional
	Name string `json:"name,omitempty"`
	// Kind is VirtualMachinePreference or VirtualMachineClusterPreference (the default).
	// +optional
	Kind string `json:"kind,omitempty"`
	// RevisionName is the ControllerRevision holding the copy of the preference in use.
	// +optional
	RevisionName string `json:"revisionName,omitempty"`
	// InferFromVolume names a volume whose source's labels say which preference to use.
	// +optional
	InferFromVolume string `json:"inferFromVolume,omitempty"`
	// InferFromVolumeFailurePolicy is Reject (the default) or Ignore.
	// +optional
	InferFromVolumeFailurePolicy *InferFromVolumeFailurePolicy `json:"inferFromVolumeFailurePolicy,omitempty"`
}

// InstancetypeStatusRef records the instance type or preference a VirtualMachine uses.
type InstancetypeStatusRef struct {
	// Name of the resource.
	// +optional
	Name string `json:"name,omitempty"`
	// Kind of the resource.
	// +optional
	Kind string `json:"kind,omitempty"`
	// ControllerRevisionRef is the ControllerRevision holding the copy in use.
	// +optional
	ControllerRevisionRef *ControllerRevisionRef `json:"controllerRevisionRef,omitempty"`
	// InferFromVolume names the volume the resource was inferred from.
	// +optional
	InferFromVolume string `json:"inferFromVolume,omitempty"`
	// InferFromVolumeFailurePolicy is Reject or Ignore.
	// +optional
	InferFromVolumeFailurePolicy *InferFromVolumeFailurePolicy `json:"inferFromVolumeFailurePolicy,omitempty"`
}

// ControllerRevisionRef names a ControllerRevision.
type ControllerRevisionRef struct {
	// Name of the ControllerRevision.
	// +optional
	Name string `json:"name,omitempty"`
}
