package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeVirt is the cluster's configuration of Podvirt, under KubeVirt's name: exactly one, in the
// namespace Podvirt is installed in. virt-operator keeps its status (phase, conditions, versions)
// current; the settings Podvirt honours are read from spec.configuration (docs/kubevirt-cr.md).
// Fields Podvirt does not know are kept, not pruned, so KubeVirt's own manifests apply unchanged.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=kv;kvs
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
type KubeVirt struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   KubeVirtSpec   `json:"spec"`
	Status KubeVirtStatus `json:"status,omitempty"`
}

// KubeVirtList is a list of KubeVirts.
//
// +kubebuilder:object:root=true
type KubeVirtList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubeVirt `json:"items"`
}

// KubeVirtSpec is the wanted configuration. KubeVirt's installation fields (image registry and
// tag, certificate rotation, workload updates, uninstall strategy …) are accepted and kept;
// Podvirt's images and certificates are set by its own install/ manifests.
//
// +kubebuilder:pruning:PreserveUnknownFields
type KubeVirtSpec struct {
	// ImageTag of KubeVirt's components (kept, not used: Podvirt's images come from install/).
	// +optional
	ImageTag string `json:"imageTag,omitempty"`
	// ImageRegistry of KubeVirt's components (kept, not used).
	// +optional
	ImageRegistry string `json:"imageRegistry,omitempty"`
	// ImagePullPolicy of KubeVirt's components (kept, not used).
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// Configuration is the cluster's settings for virtual machines.
	// +optional
	Configuration KubeVirtConfiguration `json:"configuration,omitempty"`
}

// KubeVirtConfiguration holds the settings of KubeVirt's configuration that Podvirt honours; the
// others are kept as given.
//
// +kubebuilder:pruning:PreserveUnknownFields
type KubeVirtConfiguration struct {
	// DeveloperConfiguration holds feature gates and emulation.
	// +optional
	DeveloperConfiguration *DeveloperConfiguration `json:"developerConfiguration,omitempty"`
	// MigrationConfiguration is the cluster's migration settings.
	// +optional
	MigrationConfiguration *MigrationConfiguration `json:"migrations,omitempty"`
	// EvictionStrategy is the default of instances that set none.
	// +optional
	EvictionStrategy *EvictionStrategy `json:"evictionStrategy,omitempty"`
}

// DeveloperConfiguration holds KubeVirt's feature gates and its emulation switch.
//
// +kubebuilder:pruning:PreserveUnknownFields
type DeveloperConfiguration struct {
	// FeatureGates turned on, by KubeVirt's names (HostDisk …).
	// +optional
	FeatureGates []string `json:"featureGates,omitempty"`
	// DisabledFeatureGates turned off.
	// +optional
	DisabledFeatureGates []string `json:"disabledFeatureGates,omitempty"`
	// UseEmulation runs guests under software emulation where no KVM device is present.
	// +optional
	UseEmulation bool `json:"useEmulation,omitempty"`
}

// KubeVirtStatus is what virt-operator observed.
type KubeVirtStatus struct {
	// Phase is Deploying until every component is available, then Deployed.
	// +optional
	Phase KubeVirtPhase `json:"phase,omitempty"`
	// Conditions: Available, Progressing, Degraded and Created, as KubeVirt reports them.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []KubeVirtCondition `json:"conditions,omitempty"`
	// OperatorVersion is the version of the running virt-operator.
	// +optional
	OperatorVersion string `json:"operatorVersion,omitempty"`
	// TargetKubeVirtVersion is the version being deployed.
	// +optional
	TargetKubeVirtVersion string `json:"targetKubeVirtVersion,omitempty"`
	// ObservedKubeVirtVersion is the version deployed.
	// +optional
	ObservedKubeVirtVersion string `json:"observedKubeVirtVersion,omitempty"`
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration *int64 `json:"observedGeneration,omitempty"`
	// DefaultArchitecture is the architecture of guests that name none.
	// +optional
	DefaultArchitecture string `json:"defaultArchitecture,omitempty"`
}

// KubeVirtPhase is the deployment's phase.
type KubeVirtPhase string

// KubeVirt's phases.
const (
	KubeVirtPhaseDeploying KubeVirtPhase = "Deploying"
	KubeVirtPhaseDeployed  KubeVirtPhase = "Deployed"
	KubeVirtPhaseDeleting  KubeVirtPhase = "Deleting"
)

// KubeVirtCondition is one of the KubeVirt object's conditions (KubeVirt's shape: it carries a
// lastProbeTime and no observedGeneration).
type KubeVirtCondition struct {
	// Type of the condition.
	Type KubeVirtConditionType `json:"type"`
	// Status is True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`
	// LastProbeTime is when the condition was last checked.
	// +optional
	LastProbeTime metav1.Time `json:"lastProbeTime,omitempty"`
	// LastTransitionTime is when the status last changed.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// Reason is a CamelCase word.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message says why, for people.
	// +optional
	Message string `json:"message,omitempty"`
}

// KubeVirtConditionType names a KubeVirt condition.
type KubeVirtConditionType string

// The KubeVirt object's conditions.
const (
	KubeVirtConditionAvailable   KubeVirtConditionType = "Available"
	KubeVirtConditionProgressing KubeVirtConditionType = "Progressing"
	KubeVirtConditionDegraded    KubeVirtConditionType = "Degraded"
	KubeVirtConditionCreated     KubeVirtConditionType = "Created"
)
