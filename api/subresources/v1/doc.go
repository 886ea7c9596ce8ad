// Package v1 holds the request bodies of the subresources.kubevirt.io/v1 API: the start, stop,
// restart, pause, unpause and migrate calls on VirtualMachines and VirtualMachineInstances. The
// aggregated API server serves them; the CLI sends them. They are not stored, so they have no CRD.
//
// +kubebuilder:object:generate=true
// +kubebuilder:skip
// +groupName=subresources.kubevirt.io
package v1
