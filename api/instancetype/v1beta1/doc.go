// Package v1beta1 holds the instancetype.kubevirt.io/v1beta1 API types Podvirt serves:
// VirtualMachineInstancetype, VirtualMachineClusterInstancetype, VirtualMachinePreference and
// VirtualMachineClusterPreference.
//
// An instance type carries the sizing of a VirtualMachine (vCPUs, memory, devices that need
// resources); a preference carries optional defaults (buses, models, firmware, topology). Field
// names and shapes follow KubeVirt's v1beta1 API, so KubeVirt's common-instancetypes and clients
// work against Podvirt. v1beta1 is the storage version.
//
// This package imports only k8s.io/apimachinery, k8s.io/api and Podvirt's kubevirt.io/v1 types.
//
// +kubebuilder:object:generate=true
// +groupName=instancetype.kubevirt.io
package v1beta1
