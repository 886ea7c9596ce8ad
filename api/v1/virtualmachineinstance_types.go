package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VirtualMachineInstance is a running virtual machine: one guest in one launcher Pod. It is mortal;
// a VirtualMachine recreates it according to its run strategy.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=vmi;vmis,categories=all
// +kubebuilder:selectablefield:JSONPath=".status.nodeName"
// +kubebuilder:selectablefield:JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="IP",type=string,JSONPath=".status.interfaces[0].ipAddress"
// +kubebuilder:printcolumn:name="NodeName",type=string,JSONPath=".status.nodeName"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type=='Ready')].status"
type VirtualMachineInstance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VirtualMachineInstanceSpec   `json:"spec"`
	Status VirtualMachineInstanceStatus `json:"status,omitempty"`
}

// VirtualMachineInstanceList is a list of VirtualMachineInstances.
//
// +kubebuilder:object:root=true
type VirtualMachineInstanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineInstance `json:"items"`
}

// VirtualMachineInstanceSpec describes the guest and where it may run.
//
// +kubebuilder:validation:XValidation:rule="!has(self.domain.devices) || !has(self.domain.devices.disks) || self.domain.devices.disks.all(d, has(self.volumes) && self.volumes.exists(v, v.name == d.name))",message="every disk must name a volume in spec.volumes",fieldPath=".domain.devices.disks"
// +kubebuilder:validation:XValidation:rule="!has(self.domain.devices) || !has(self.domain.devices.interfaces) || self.domain.devices.interfaces.all(i, has(self.networks) && self.networks.exists(n, n.name == i.name))",message="every interface must name a network in spec.networks",fieldPath=".domain.devices.interfaces"
type VirtualMachineInstanceSpec struct {
	// PriorityClassName of the launcher Pod.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// Domain is the virtual hardware of the guest.
	Domain DomainSpec `json:"domain"`

	// NodeSelector is copied to the launcher Pod.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Affinity is copied to the launcher Pod.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// SchedulerName is copied to the launcher Pod.
	// +optional
	SchedulerName string `json:"schedulerName,omitempty"`
	// ServiceAccountName is the launcher Pod's ServiceAccount; the guest sees its token only through
	// a serviceAccount volume.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// Tolerations are copied to the launcher Pod.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// TopologySpreadConstraints are copied to the launcher Pod.
	// +optional
	// +listType=map
	// +listMapKey=topologyKey
	// +listMapKey=whenUnsatisfiable
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// EvictionStrategy says what happens when the node is drained.
	// +optional
	EvictionStrategy *EvictionStrategy `json:"evictionStrategy,omitempty"`

	// StartStrategy Paused starts the guest paused.
	// +optional
	StartStrategy *StartStrategy `json:"startStrategy,omitempty"`

	// TerminationGracePeriodSeconds is how long the guest has to shut down after an ACPI power-off
	// before it is killed. Defaults to 30.
	// At most MaxGracePeriodSeconds.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31536000
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// Volumes the disks refer to by name.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(v, self.exists_one(w, w.name == v.name))",message="volume names must be unique"
	Volumes []Volume `json:"volumes,omitempty"`

	// LivenessProbe stops the instance when it fails.
	// +optional
	LivenessProbe *Probe `json:"livenessProbe,omitempty"`
	// ReadinessProbe takes the instance out of Service endpoints while it fails.
	// +optional
	ReadinessProbe *Probe `json:"readinessProbe,omitempty"`

	// Hostname of the guest; defaults to the instance name.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Hostname string `json:"hostname,omitempty"`
	// Subdomain makes the guest's FQDN hostname.subdomain.namespace.svc.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Subdomain string `json:"subdomain,omitempty"`

	// Networks the interfaces refer to by name.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(n, self.exists_one(m, m.name == n.name))",message="network names must be unique"
	Networks []Network `json:"networks,omitempty"`

	// DNSPolicy of the launcher Pod.
	// +optional
	DNSPolicy corev1.DNSPolicy `json:"dnsPolicy,omitempty"`
	// DNSConfig of the launcher Pod.
	// +optional
	DNSConfig *corev1.PodDNSConfig `json:"dnsConfig,omitempty"`

	// AccessCredentials are SSH keys and passwords to put into the guest.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	AccessCredentials []AccessCredential `json:"accessCredentials,omitempty"`

	// Architecture of the guest (e.g. amd64, arm64, s390x); defaults to the cluster's.
	// +optional
	Architecture string `json:"architecture,omitempty"`

	// ResourceClaims are DRA claims the launcher Pod needs; devices refer to them by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	ResourceClaims []VirtualMachineInstanceResourceClaim `json:"resourceClaims,omitempty"`

	// UtilityVolumes are PVCs mounted into the launcher Pod without a matching disk.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	UtilityVolumes []UtilityVolume `json:"utilityVolumes,omitempty"`
}

// VirtualMachineInstanceResourceClaim names a ResourceClaim, or a template for one, by a name local
// to the instance.
type VirtualMachineInstanceResourceClaim struct {
	// Name of the claim inside the instance.
	Name string `json:"name"`
	// ResourceClaimName is an existing ResourceClaim in the instance's namespace.
	// +optional
	ResourceClaimName *string `json:"resourceClaimName,omitempty"`
	// ResourceClaimTemplateName is a ResourceClaimTemplate a claim is made from for the launcher Pod.
	// +optional
	ResourceClaimTemplateName *string `json:"resourceClaimTemplateName,omitempty"`
}

// EvictionStrategy says what happens to an instance when its node is drained.
//
// +kubebuilder:validation:Enum=None;LiveMigrate;LiveMigrateIfPossible;External
type EvictionStrategy string

// Eviction strategies.
const (
	EvictionStrategyNone                  EvictionStrategy = "None"
	EvictionStrategyLiveMigrate           EvictionStrategy = "LiveMigrate"
	EvictionStrategyLiveMigrateIfPossible EvictionStrategy = "LiveMigrateIfPossible"
	EvictionStrategyExternal              EvictionStrategy = "External"
)

// EvictionStrategies are the strategies KubeVirt defines.
var EvictionStrategies = []EvictionStrategy{EvictionStrategyNone, EvictionStrategyLiveMigrate, EvictionStrategyLiveMigrateIfPossible, EvictionStrategyExternal}

// StartStrategy says how the guest starts.
//
// +kubebuilder:validation:Enum=Paused
type StartStrategy string

// StartStrategyPaused starts the guest paused.
const StartStrategyPaused StartStrategy = "Paused"

// DefaultGracePeriodSeconds is the grace period of an instance whose
// spec.terminationGracePeriodSeconds is unset (KubeVirt's default).
const DefaultGracePeriodSeconds int64 = 30

// MaxGracePeriodSeconds bounds spec.terminationGracePeriodSeconds and a stop request's
// gracePeriod (one year; the CRD's Maximum says the same): far beyond any shutdown, and small
// enough that the grace period plus the launcher Pod's margin, in nanoseconds, fits an int64.
const MaxGracePeriodSeconds int64 = 365 * 24 * 60 * 60

// GracePeriodSeconds is the instance's termination grace period, or the default when unset, within
// [0, MaxGracePeriodSeconds] whatever an object stored before the bound says.
func (s *VirtualMachineInstanceSpec) GracePeriodSeconds() int64 {
	if s.TerminationGracePeriodSeconds != nil {
		return min(max(*s.TerminationGracePeriodSeconds, 0), MaxGracePeriodSeconds)
	}
	return DefaultGracePeriodSeconds
}

// Finalizers and annotations Podvirt's controllers put on instances.
const (
	// VirtualMachineControllerFinalizer keeps an instance until its launcher Pod is gone, so the
	// controllers see its final state.
	VirtualMachineControllerFinalizer = "kubevirt.io/virtualMachineControllerFinalize"
	// TemplateHashAnnotation records the hash of the VirtualMachine template an instance was created
	// from; when the template changes while the instance runs, the VirtualMachine shows RestartRequired.
	TemplateHashAnnotation = "podvirt.io/template-hash"
	// VirtualMachineLabel names the VirtualMachine that created an instance.
	VirtualMachineLabel = "kubevirt.io/vm"
)

// SetPhase moves the instance to phase with reason, recording when the phase was entered. Every
// writer of the phase (the VMI controller, the node agent, node health) goes through it.
func (st *VirtualMachineInstanceStatus) SetPhase(phase VirtualMachineInstancePhase, reason string, now metav1.Time) {
	if st.Phase != phase {
		st.Phase = phase
		st.PhaseTransitionTimestamps = append(st.PhaseTransitionTimestamps, VirtualMachineInstancePhaseTransitionTimestamp{Phase: phase, PhaseTransitionTimestamp: now})
	}
	st.Reason = reason
}
