package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// VirtualMachineInstanceStatus is the observed state of an instance.
type VirtualMachineInstanceStatus struct {
	// Phase is where the instance is in its life.
	// +optional
	Phase VirtualMachineInstancePhase `json:"phase,omitempty"`
	// PhaseTransitionTimestamps records when each phase was entered.
	// +optional
	// +listType=atomic
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
	// MigrationMethod says whether migrating copies the disks too (BlockMigration) or not (LiveMigration).
	// +optional
	MigrationMethod VirtualMachineInstanceMigrationMethod `json:"migrationMethod,omitempty"`
	// MigrationTransport is how migration data travels.
	// +optional
	MigrationTransport VirtualMachineInstanceMigrationTransport `json:"migrationTransport,omitempty"`
	// QOSClass of the launcher Pod.
	// +optional
	QOSClass *corev1.PodQOSClass `json:"qosClass,omitempty"`
	// LauncherContainerImageVersion is the launcher image the instance runs with.
	// +optional
	LauncherContainerImageVersion string `json:"launcherContainerImageVersion,omitempty"`
	// EvacuationNodeName is the node being drained away from; set by the system only.
	// +optional
	EvacuationNodeName string `json:"evacuationNodeName,omitempty"`
	// ActivePods maps the UIDs of the instance's Pods to their nodes (two during a migration).
	// +optional
	ActivePods map[types.UID]string `json:"activePods,omitempty"`
	// VolumeStatus is the state of each volume.
	// +optional
	// +listType=atomic
	VolumeStatus []VolumeStatus `json:"volumeStatus,omitempty"`
	// KernelBootStatus describes the kernel boot container's artifacts.
	// +optional
	KernelBootStatus *KernelBootStatus `json:"kernelBootStatus,omitempty"`
	// FSFreezeStatus is "frozen" while a guest filesystem freeze is requested.
	// +optional
	FSFreezeStatus string `json:"fsFreezeStatus,omitempty"`
	// TopologyHints carry node facts a migration target must match.
	// +optional
	TopologyHints *TopologyHints `json:"topologyHints,omitempty"`
	// VirtualMachineRevisionName is the VirtualMachine revision the instance was made from.
	// +optional
	VirtualMachineRevisionName string `json:"virtualMachineRevisionName,omitempty"`
	// RuntimeUser is the UID the launcher runs as.
	// +optional
	RuntimeUser uint64 `json:"runtimeUser,omitempty"`
	// VSOCKCID is the VSOCK context ID given to the guest.
	// +optional
	// +kubebuilder:validation:Format=int64
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967295
	VSOCKCID *uint32 `json:"VSOCKCID,omitempty"`
	// SelinuxContext is the launcher Pod's SELinux context.
	// +optional
	SelinuxContext string `json:"selinuxContext,omitempty"`
	// Machine is the machine type the guest really got (aliases resolved).
	// +optional
	Machine *Machine `json:"machine,omitempty"`
	// CurrentCPUTopology is the guest's CPU topology now; it differs from the spec during CPU hotplug.
	// +optional
	CurrentCPUTopology *GuestCPUTopology `json:"currentCPUTopology,omitempty"`
	// Memory describes the guest's memory now.
	// +optional
	Memory *GuestMemoryStatus `json:"memory,omitempty"`
	// MigratedVolumes pairs source and destination claims during a volume migration.
	// +optional
	// +listType=atomic
	MigratedVolumes []StorageMigratedVolumeInfo `json:"migratedVolumes,omitempty"`
	// DeviceStatus describes devices allocated through DRA.
	// +optional
	DeviceStatus *DeviceStatus `json:"deviceStatus,omitempty"`
	// ChangedBlockTracking is the state of changed block tracking and of the last backup.
	// +optional
	// +nullable
	ChangedBlockTracking *ChangedBlockTrackingStatus `json:"changedBlockTracking,omitempty"`
	// LauncherPod is the name of the launcher Pod that runs the guest (Podvirt only).
	// +optional
	LauncherPod string `json:"launcherPod,omitempty"`
}

// VirtualMachineInstancePhase is where an instance is in its life.
//
// +kubebuilder:validation:Enum=Pending;Scheduling;Scheduled;Running;Succeeded;Failed;WaitingForSync;Unknown
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
	// WaitingForSync: a migration receiver waits for the source instance (KubeVirt's decentralized migration).
	WaitingForSync VirtualMachineInstancePhase = "WaitingForSync"
	// Unknown: the state cannot be determined.
	Unknown VirtualMachineInstancePhase = "Unknown"
)

// IsFinal reports whether the phase can never change again.
func (p VirtualMachineInstancePhase) IsFinal() bool { return p == Succeeded || p == Failed }

// VirtualMachineInstance condition types.
const (
	VirtualMachineInstanceReady          = "Ready"
	VirtualMachineInstancePaused         = "Paused"
	VirtualMachineInstanceProvisioning   = "Provisioning"
	VirtualMachineInstanceSynchronized   = "Synchronized"
	VirtualMachineInstanceAgentConnected = "AgentConnected"
	// VirtualMachineInstanceAccessCredentialsSynchronized: the guest agent put the keys and
	// passwords of accessCredentials into the guest (False: the message says what failed).
	VirtualMachineInstanceAccessCredentialsSynchronized = "AccessCredentialsSynchronized"
	VirtualMachineInstanceLiveMigratable                = "LiveMigratable"
	VirtualMachineInstanceSoftwareEmulation             = "SoftwareEmulation"
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

// VirtualMachineInstancePhaseTransitionTimestamp records when a phase was entered.
type VirtualMachineInstancePhaseTransitionTimestamp struct {
	// Phase that was entered.
	// +optional
	Phase VirtualMachineInstancePhase `json:"phase,omitempty"`
	// PhaseTransitionTimestamp is when it was entered.
	// +optional
	PhaseTransitionTimestamp metav1.Time `json:"phaseTransitionTimestamp,omitempty"`
}

// VirtualMachineInstanceNetworkInterface is one of the guest's network interfaces.
type VirtualMachineInstanceNetworkInterface struct {
	// Name of the interface in spec.domain.devices.interfaces.
	// +optional
	Name string `json:"name,omitempty"`
	// IP is the primary address (the first of IPs).
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
	// PodInterfaceName is the matching interface of the launcher Pod.
	// +optional
	PodInterfaceName string `json:"podInterfaceName,omitempty"`
	// InfoSource says where the data came from (domain, guest-agent, multus-status, comma-joined).
	// +optional
	InfoSource string `json:"infoSource,omitempty"`
	// QueueCount is the number of multiqueue queues of the interface.
	// +optional
	QueueCount int32 `json:"queueCount,omitempty"`
	// LinkState is the link's operational state: up or down.
	// +optional
	LinkState string `json:"linkState,omitempty"`
}

// VirtualMachineInstanceGuestOSInfo is what the guest reports about its operating system.
type VirtualMachineInstanceGuestOSInfo struct {
	// Name of the OS.
	// +optional
	Name string `json:"name,omitempty"`
	// KernelRelease of the guest kernel.
	// +optional
	KernelRelease string `json:"kernelRelease,omitempty"`
	// Version of the OS.
	// +optional
	Version string `json:"version,omitempty"`
	// PrettyName of the OS, for humans.
	// +optional
	PrettyName string `json:"prettyName,omitempty"`
	// VersionID of the OS.
	// +optional
	VersionID string `json:"versionId,omitempty"`
	// KernelVersion of the guest kernel.
	// +optional
	KernelVersion string `json:"kernelVersion,omitempty"`
	// Machine is the guest's hardware architecture.
	// +optional
	Machine string `json:"machine,omitempty"`
	// ID of the OS (e.g. fedora).
	// +optional
	ID string `json:"id,omitempty"`
}

// TopologyHints carry node facts a migration target must match.
type TopologyHints struct {
	// TSCFrequency of the source node, in Hz.
	// +optional
	TSCFrequency *int64 `json:"tscFrequency,omitempty"`
}

// GuestCPUTopology is a guest's sockets, cores and threads.
type GuestCPUTopology struct {
	// Cores per socket.
	// +optional
	Cores uint32 `json:"cores,omitempty"`
	// Sockets of the guest.
	// +optional
	Sockets uint32 `json:"sockets,omitempty"`
	// Threads per core.
	// +optional
	Threads uint32 `json:"threads,omitempty"`
}

// GuestMemoryStatus describes the guest's memory.
type GuestMemoryStatus struct {
	// GuestAtBoot is the memory the guest booted with.
	// +optional
	GuestAtBoot *resource.Quantity `json:"guestAtBoot,omitempty"`
	// GuestCurrent is the memory the guest has now.
	// +optional
	GuestCurrent *resource.Quantity `json:"guestCurrent,omitempty"`
	// GuestRequested is the memory asked for through hotplug.
	// +optional
	GuestRequested *resource.Quantity `json:"guestRequested,omitempty"`
	// MemoryOverhead is the launcher Pod's memory on top of the guest's.
	// +optional
	MemoryOverhead *resource.Quantity `json:"memoryOverhead,omitempty"`
}

// DeviceStatus describes the devices allocated through DRA.
type DeviceStatus struct {
	// GPUStatuses are the GPUs of spec.domain.devices.gpus.
	// +optional
	// +listType=atomic
	GPUStatuses []DeviceStatusInfo `json:"gpuStatuses,omitempty"`
	// HostDeviceStatuses are the devices of spec.domain.devices.hostDevices.
	// +optional
	// +listType=atomic
	HostDeviceStatuses []DeviceStatusInfo `json:"hostDeviceStatuses,omitempty"`
}

// DeviceStatusInfo is the allocation of one device.
type DeviceStatusInfo struct {
	// Name of the device in the spec.
	Name string `json:"name"`
	// DeviceResourceClaimStatus is what DRA allocated for it.
	// +optional
	DeviceResourceClaimStatus *DeviceResourceClaimStatus `json:"deviceResourceClaimStatus,omitempty"`
}

// DeviceResourceClaimStatus is the device a resource claim got.
type DeviceResourceClaimStatus struct {
	// Name of the allocated device, as in the claim's status.
	// +optional
	Name *string `json:"name,omitempty"`
	// ResourceClaimName is the ResourceClaim the device came from.
	// +optional
	ResourceClaimName *string `json:"resourceClaimName,omitempty"`
	// Attributes of the allocated device.
	// +optional
	Attributes *DeviceAttribute `json:"attributes,omitempty"`
}

// DeviceAttribute locates an allocated device on its node; one field is set.
type DeviceAttribute struct {
	// PCIAddress of the device.
	// +optional
	PCIAddress *string `json:"pciAddress,omitempty"`
	// MDevUUID of the mediated device.
	// +optional
	MDevUUID *string `json:"mDevUUID,omitempty"`
}
