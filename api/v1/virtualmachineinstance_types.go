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
	// Tolerations are copied to the launcher Pod.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// EvictionStrategy says what happens when the node is drained.
	// +optional
	EvictionStrategy *EvictionStrategy `json:"evictionStrategy,omitempty"`

	// StartStrategy Paused starts the guest paused.
	// +optional
	StartStrategy *StartStrategy `json:"startStrategy,omitempty"`

	// TerminationGracePeriodSeconds is how long the guest has to shut down after an ACPI power-off
	// before it is killed. Defaults to 30.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// Volumes the disks refer to by name.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(v, self.exists_one(w, w.name == v.name))",message="volume names must be unique"
	Volumes []Volume `json:"volumes,omitempty"`

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

// StartStrategy says how the guest starts.
//
// +kubebuilder:validation:Enum=Paused
type StartStrategy string

// StartStrategyPaused starts the guest paused.
const StartStrategyPaused StartStrategy = "Paused"

// VirtualMachineInstanceStatus is the observed state of an instance.
type VirtualMachineInstanceStatus struct {
	// Phase is where the instance is in its life.
	// +optional
	Phase VirtualMachineInstancePhase `json:"phase,omitempty"`
	// PhaseTransitionTimestamps records when each phase was entered.
	// +optional
	PhaseTransitionTimestamps []VirtualMachineInstancePhaseTransitionTimestamp `json:"phaseTransitionTimestamps,omitempty"`
	// Conditions: Ready, Paused, Provisioning, Synchronized, AgentConnected, LiveMigratable,
	// SoftwareEmulation.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// NodeName is the node the instance runs on.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// Reason is a short CamelCase reason for the phase (e.g. PodDeleted, NodeUnresponsive).
	// +optional
	Reason string `json:"reason,omitempty"`
	// Interfaces are the guest's network interfaces.
	// +optional
	Interfaces []VirtualMachineInstanceNetworkInterface `json:"interfaces,omitempty"`
	// GuestOSInfo is what the guest reports about itself.
	// +optional
	GuestOSInfo VirtualMachineInstanceGuestOSInfo `json:"guestOSInfo,omitempty"`
	// MigrationState is the state of the last migration.
	// +optional
	MigrationState *VirtualMachineInstanceMigrationState `json:"migrationState,omitempty"`
	// LauncherPod is the name of the launcher Pod that runs the guest.
	// +optional
	LauncherPod string `json:"launcherPod,omitempty"`
}

// VirtualMachineInstancePhase is where an instance is in its life.
//
// +kubebuilder:validation:Enum=Pending;Scheduling;Scheduled;Running;Succeeded;Failed;Unknown
type VirtualMachineInstancePhase string

// Instance phases.
const (
	VmPhaseUnset VirtualMachineInstancePhase = ""
	// Pending: the instance is accepted; no launcher Pod yet.
	Pending VirtualMachineInstancePhase = "Pending"
	// Scheduling: the launcher Pod exists and is not running yet.
	Scheduling VirtualMachineInstancePhase = "Scheduling"
	// Scheduled: the launcher Pod runs; the node agent takes over.
	Scheduled VirtualMachineInstancePhase = "Scheduled"
	// Running: the guest runs.
	Running VirtualMachineInstancePhase = "Running"
	// Succeeded: the guest shut down.
	Succeeded VirtualMachineInstancePhase = "Succeeded"
	// Failed: the guest or its Pod failed, or its node was lost.
	Failed VirtualMachineInstancePhase = "Failed"
	// Unknown: the state cannot be determined.
	Unknown VirtualMachineInstancePhase = "Unknown"
)

// IsFinal reports whether the phase can never change again.
func (p VirtualMachineInstancePhase) IsFinal() bool { return p == Succeeded || p == Failed }

// VirtualMachineInstance condition types.
const (
	VirtualMachineInstanceReady             = "Ready"
	VirtualMachineInstancePaused            = "Paused"
	VirtualMachineInstanceProvisioning      = "Provisioning"
	VirtualMachineInstanceSynchronized      = "Synchronized"
	VirtualMachineInstanceAgentConnected    = "AgentConnected"
	VirtualMachineInstanceLiveMigratable    = "LiveMigratable"
	VirtualMachineInstanceSoftwareEmulation = "SoftwareEmulation"
	// VirtualMachineInstancePodScheduled mirrors the launcher Pod's PodScheduled condition.
	VirtualMachineInstancePodScheduled = "PodScheduled"
)

// Reasons of a final phase (status.reason) and of the Ready condition that several components write
// or act on. The node agent passes the launcher's own reasons on as well (api/launcher/v1).
const (
	// ReasonPodFailed: the launcher Pod failed.
	ReasonPodFailed = "PodFailed"
	// ReasonPodCompleted: the launcher Pod completed.
	ReasonPodCompleted = "PodCompleted"
	// ReasonPodDeleted: the launcher Pod was deleted while the instance was not.
	ReasonPodDeleted = "PodDeleted"
	// ReasonInvalidSpec: the instance can never run as specified.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonNodeUnresponsive: the node agent on the instance's node stopped renewing its heartbeat.
	ReasonNodeUnresponsive = "NodeUnresponsive"
)

// DefaultGracePeriodSeconds is the grace period of an instance whose
// spec.terminationGracePeriodSeconds is unset (KubeVirt's default).
const DefaultGracePeriodSeconds int64 = 30

// GracePeriodSeconds is the instance's termination grace period, or the default when unset.
func (s *VirtualMachineInstanceSpec) GracePeriodSeconds() int64 {
	if s.TerminationGracePeriodSeconds != nil {
		return *s.TerminationGracePeriodSeconds
	}
	return DefaultGracePeriodSeconds
}

// VirtualMachineInstancePhaseTransitionTimestamp records when a phase was entered.
type VirtualMachineInstancePhaseTransitionTimestamp struct {
	Phase                    VirtualMachineInstancePhase `json:"phase,omitempty"`
	PhaseTransitionTimestamp metav1.Time                 `json:"phaseTransitionTimestamp,omitempty"`
}

// VirtualMachineInstanceNetworkInterface is one of the guest's network interfaces.
type VirtualMachineInstanceNetworkInterface struct {
	// Name of the interface in spec.domain.devices.interfaces.
	// +optional
	Name string `json:"name,omitempty"`
	// IP is the primary address.
	// +optional
	IP string `json:"ipAddress,omitempty"`
	// IPs are all addresses.
	// +optional
	IPs []string `json:"ipAddresses,omitempty"`
	// MAC address.
	// +optional
	MAC string `json:"mac,omitempty"`
	// InterfaceName is the name inside the guest.
	// +optional
	InterfaceName string `json:"interfaceName,omitempty"`
}

// VirtualMachineInstanceGuestOSInfo is what the guest reports about its operating system.
type VirtualMachineInstanceGuestOSInfo struct {
	Name          string `json:"name,omitempty"`
	KernelRelease string `json:"kernelRelease,omitempty"`
	Version       string `json:"version,omitempty"`
	PrettyName    string `json:"prettyName,omitempty"`
	VersionID     string `json:"versionId,omitempty"`
	KernelVersion string `json:"kernelVersion,omitempty"`
	Machine       string `json:"machine,omitempty"`
	ID            string `json:"id,omitempty"`
}

// VirtualMachineInstanceMigrationState is the state of an instance's last migration.
type VirtualMachineInstanceMigrationState struct {
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	EndTimestamp   *metav1.Time `json:"endTimestamp,omitempty"`
	TargetNode     string       `json:"targetNode,omitempty"`
	TargetPod      string       `json:"targetPod,omitempty"`
	SourceNode     string       `json:"sourceNode,omitempty"`
	Completed      bool         `json:"completed,omitempty"`
	Failed         bool         `json:"failed,omitempty"`
	AbortRequested bool         `json:"abortRequested,omitempty"`
	MigrationUID   string       `json:"migrationUid,omitempty"`
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
