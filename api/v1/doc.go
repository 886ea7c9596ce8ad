// Package v1 holds the kubevirt.io/v1 API types Podvirt serves: VirtualMachine,
// VirtualMachineInstance, VirtualMachineInstanceReplicaSet, VirtualMachineInstanceMigration and
// KubeVirt (the cluster configuration).
//
// Field names and meanings follow KubeVirt's API, so KubeVirt manifests and clients work against
// Podvirt for every feature it implements. The CRDs in install/ are generated from these types
// (make generate); v1 is the storage version and v1alpha3 is served with the identical schema.
//
// This package imports only k8s.io/apimachinery and k8s.io/api, so any client can import it cheaply.
//
// +kubebuilder:object:generate=true
// +groupName=kubevirt.io
package v1
