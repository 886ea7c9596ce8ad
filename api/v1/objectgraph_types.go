package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ObjectGraphNode is one object of a VM's or instance's object graph (KubeVirt's objectgraph
// subresource): the object, its dependency-type label, whether the VM could run without it, and
// the objects it brings in.
type ObjectGraphNode struct {
	ObjectReference corev1.TypedObjectReference `json:"objectReference"`
	// Labels carry DependencyTypeLabel.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Optional: the VM runs without it (an instancetype, a preference, a network attachment).
	// +optional
	Optional *bool `json:"optional,omitempty"`
	// +optional
	Children []ObjectGraphNode `json:"children,omitempty"`
}

// ObjectGraphOptions is the body of an objectgraph call.
type ObjectGraphOptions struct {
	// IncludeOptionalNodes (default true) keeps the optional objects.
	// +optional
	IncludeOptionalNodes *bool `json:"includeOptionalNodes,omitempty"`
	// LabelSelector keeps only the objects (and their children) it selects; the root always stays.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
}

// DependencyTypeLabel says what an object of a graph is to the VM: storage, compute, config or network.
const DependencyTypeLabel = "kubevirt.io/dependency-type"

// PersistentStateClaimName names the claim that keeps the state of the VM (or standalone instance)
// called name across restarts (a persistent TPM's, persistent EFI variables): KubeVirt's name.
func PersistentStateClaimName(name string) string {
	return "persistent-state-for-" + name
}
