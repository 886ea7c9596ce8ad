package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VirtualMachineInstanceReplicaSet keeps a number of identical instances running.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.labelSelector
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=vmirs;vmirss,categories=all
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=".spec.replicas",description="Number of desired VirtualMachineInstances"
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=".status.replicas",description="Number of managed and not final or deleted VirtualMachineInstances"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=".status.readyReplicas",description="Number of managed VirtualMachineInstances which are ready to receive traffic"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type VirtualMachineInstanceReplicaSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VirtualMachineInstanceReplicaSetSpec   `json:"spec"`
	Status VirtualMachineInstanceReplicaSetStatus `json:"status,omitempty"`
}

// VirtualMachineInstanceReplicaSetList is a list of VirtualMachineInstanceReplicaSets.
//
// +kubebuilder:object:root=true
type VirtualMachineInstanceReplicaSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineInstanceReplicaSet `json:"items"`
}

// VirtualMachineInstanceReplicaSetSpec is the desired state of a replica set.
//
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || self.replicas >= 0",message="spec.replicas must be 0 or more",fieldPath=".replicas"
type VirtualMachineInstanceReplicaSetSpec struct {
	// Replicas is the number of instances wanted; defaults to 1.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// Selector picks the instances this replica set owns; it must match the template's labels.
	Selector *metav1.LabelSelector `json:"selector"`
	// Template of the instances.
	Template *VirtualMachineInstanceTemplateSpec `json:"template"`
	// Paused stops the replica set from creating or deleting instances.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// WantedReplicas is spec.replicas, 1 when unset.
func (s *VirtualMachineInstanceReplicaSetSpec) WantedReplicas() int32 {
	if s.Replicas == nil {
		return 1
	}
	return *s.Replicas
}

// VirtualMachineInstanceReplicaSetStatus is the observed state of a replica set.
type VirtualMachineInstanceReplicaSetStatus struct {
	// Replicas is the number of owned instances that are not final.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas is the number of owned instances that are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// LabelSelector is the selector as a string, for the scale subresource.
	// +optional
	LabelSelector string `json:"labelSelector,omitempty"`
	// Conditions: ReplicaFailure, Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Replica set condition types.
const (
	// VirtualMachineInstanceReplicaSetReplicaFailure reports that instances could not be created or deleted.
	VirtualMachineInstanceReplicaSetReplicaFailure = "ReplicaFailure"
	// VirtualMachineInstanceReplicaSetPaused reports that the replica set is paused.
	VirtualMachineInstanceReplicaSetPaused = "Paused"
)
