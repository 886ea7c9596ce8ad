package v1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// VirtualMachineInstanceMigrationState is the state of an instance's last migration.
type VirtualMachineInstanceMigrationState struct {
	// StartTimestamp is when the migration started.
	// +optional
	// +nullable
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// EndTimestamp is when the migration ended.
	// +optional
	// +nullable
	EndTimestamp *metav1.Time `json:"endTimestamp,omitempty"`
	// TargetNodeDomainReadyTimestamp is when the target saw the guest become active.
	// +optional
	TargetNodeDomainReadyTimestamp *metav1.Time `json:"targetNodeDomainReadyTimestamp,omitempty"`
	// TargetNodeDomainDetected says the target saw the guest start.
	// +optional
	TargetNodeDomainDetected bool `json:"targetNodeDomainDetected,omitempty"`
	// TargetNodeAddress is the address migration data is sent to.
	// +optional
	TargetNodeAddress string `json:"targetNodeAddress,omitempty"`
	// TargetDirectMigrationNodePorts are the ports opened on the target for the migration.
	// +optional
	TargetDirectMigrationNodePorts map[string]int `json:"targetDirectMigrationNodePorts,omitempty"`
	// TargetNode is the node the instance moves to.
	// +optional
	TargetNode string `json:"targetNode,omitempty"`
	// TargetPod is the launcher Pod the instance moves to.
	// +optional
	TargetPod string `json:"targetPod,omitempty"`
	// TargetAttachmentPodUID is the target's hotplug attachment Pod.
	// +optional
	TargetAttachmentPodUID types.UID `json:"targetAttachmentPodUID,omitempty"`
	// SourceNode is the node the instance moves from.
	// +optional
	SourceNode string `json:"sourceNode,omitempty"`
	// SourcePod is the launcher Pod the instance moves from.
	// +optional
	SourcePod string `json:"sourcePod,omitempty"`
	// Completed says the migration finished.
	// +optional
	Completed bool `json:"completed,omitempty"`
	// Failed says the migration failed.
	// +optional
	Failed bool `json:"failed,omitempty"`
	// AbortRequested says an abort was asked for.
	// +optional
	AbortRequested bool `json:"abortRequested,omitempty"`
	// AbortStatus is the outcome of an abort.
	// +optional
	AbortStatus MigrationAbortStatus `json:"abortStatus,omitempty"`
	// FailureReason explains a failure.
	// +optional
	FailureReason string `json:"failureReason,omitempty"`
	// MigrationUID is the UID of the VirtualMachineInstanceMigration.
	// +optional
	MigrationUID string `json:"migrationUid,omitempty"`
	// Mode is PreCopy, PostCopy or Paused.
	// +optional
	Mode MigrationMode `json:"mode,omitempty"`
	// MigrationPolicyName is the MigrationPolicy that applied, if any.
	// +optional
	MigrationPolicyName *string `json:"migrationPolicyName,omitempty"`
	// MigrationConfiguration is the migration settings that applied.
	// +optional
	MigrationConfiguration *MigrationConfiguration `json:"migrationConfiguration,omitempty"`
	// TargetCPUSet is the dedicated CPUs given on the target.
	// +optional
	// +listType=atomic
	TargetCPUSet []int `json:"targetCPUSet,omitempty"`
	// TargetNodeTopology is the NUMA topology of the target, for dedicated CPUs.
	// +optional
	TargetNodeTopology string `json:"targetNodeTopology,omitempty"`
	// SourcePersistentStatePVCName is the source's persistent state (TPM, EFI) PVC.
	// +optional
	SourcePersistentStatePVCName string `json:"sourcePersistentStatePVCName,omitempty"`
	// TargetPersistentStatePVCName is the target's persistent state (TPM, EFI) PVC.
	// +optional
	TargetPersistentStatePVCName string `json:"targetPersistentStatePVCName,omitempty"`
	// SourceState is kept by the source node's agent.
	// +optional
	SourceState *VirtualMachineInstanceMigrationSourceState `json:"sourceState,omitempty"`
	// TargetState is kept by the target node's agent.
	// +optional
	TargetState *VirtualMachineInstanceMigrationTargetState `json:"targetState,omitempty"`
	// MigrationNetworkType is Pod or Migration (a dedicated network).
	// +optional
	MigrationNetworkType MigrationNetworkType `json:"migrationNetworkType,omitempty"`
	// TargetMemoryOverhead is the memory overhead of the target launcher Pod.
	// +optional
	TargetMemoryOverhead *resource.Quantity `json:"targetMemoryOverhead,omitempty"`
}

// VirtualMachineInstanceCommonMigrationState is what either side of a migration records.
type VirtualMachineInstanceCommonMigrationState struct {
	// Node of this side.
	// +optional
	Node string `json:"node,omitempty"`
	// Pod of this side.
	// +optional
	Pod string `json:"pod,omitempty"`
	// MigrationUID is this side's migration object.
	// +optional
	MigrationUID types.UID `json:"migrationUID,omitempty"`
	// DomainName is the libvirt domain name on this side.
	// +optional
	DomainName *string `json:"domainName,omitempty"`
	// DomainNamespace is the namespace part of the libvirt domain name.
	// +optional
	DomainNamespace *string `json:"domainNamespace,omitempty"`
	// SyncAddress is the host:port to synchronize the instance with the other side.
	// +optional
	SyncAddress *string `json:"syncAddress,omitempty"`
	// PersistentStatePVCName is this side's persistent state PVC.
	// +optional
	PersistentStatePVCName *string `json:"persistentStatePVCName,omitempty"`
	// SelinuxContext of this side's Pod.
	// +optional
	SelinuxContext string `json:"selinuxContext,omitempty"`
	// VirtualMachineInstanceUID is this side's instance.
	// +optional
	VirtualMachineInstanceUID *types.UID `json:"virtualMachineInstanceUID,omitempty"`
}

// VirtualMachineInstanceMigrationSourceState is the source side's migration state.
type VirtualMachineInstanceMigrationSourceState struct {
	VirtualMachineInstanceCommonMigrationState `json:",inline"`

	// NodeSelectors the target needs to place its receiving Pod.
	// +optional
	NodeSelectors map[string]string `json:"nodeSelectors,omitempty"`
}

// VirtualMachineInstanceMigrationTargetState is the target side's migration state.
type VirtualMachineInstanceMigrationTargetState struct {
	VirtualMachineInstanceCommonMigrationState `json:",inline"`

	// DomainReadyTimestamp is when the target saw the guest become active.
	// +optional
	DomainReadyTimestamp *metav1.Time `json:"domainReadyTimestamp,omitempty"`
	// DomainDetected says the target saw the guest start.
	// +optional
	DomainDetected bool `json:"domainDetected,omitempty"`
	// NodeAddress is the address migration data is sent to.
	// +optional
	NodeAddress *string `json:"nodeAddress,omitempty"`
	// DirectMigrationNodePorts are the ports opened on the target.
	// +optional
	DirectMigrationNodePorts map[string]int `json:"directMigrationNodePorts,omitempty"`
	// AttachmentPodUID is the target's hotplug attachment Pod.
	// +optional
	AttachmentPodUID *types.UID `json:"attachmentPodUID,omitempty"`
	// CPUSet is the dedicated CPUs given on the target.
	// +optional
	// +listType=atomic
	CPUSet []int `json:"cpuSet,omitempty"`
	// NodeTopology is the NUMA topology of the target.
	// +optional
	NodeTopology *string `json:"nodeTopology,omitempty"`
}

// MigrationAbortStatus is the outcome of aborting a migration.
type MigrationAbortStatus string

// Abort outcomes.
const (
	MigrationAbortSucceeded  MigrationAbortStatus = "Succeeded"
	MigrationAbortFailed     MigrationAbortStatus = "Failed"
	MigrationAbortInProgress MigrationAbortStatus = "Aborting"
)

// MigrationMode is how a running migration copies memory.
type MigrationMode string

// Migration modes.
const (
	MigrationPreCopy  MigrationMode = "PreCopy"
	MigrationPostCopy MigrationMode = "PostCopy"
	MigrationPaused   MigrationMode = "Paused"
)

// VirtualMachineInstanceMigrationTransport is how migration data travels.
type VirtualMachineInstanceMigrationTransport string

// MigrationTransportUnix migrates over a unix socket proxy.
const MigrationTransportUnix VirtualMachineInstanceMigrationTransport = "Unix"

// VirtualMachineInstanceMigrationMethod says whether migrating copies the disks.
type VirtualMachineInstanceMigrationMethod string

// Migration methods.
const (
	BlockMigration VirtualMachineInstanceMigrationMethod = "BlockMigration"
	LiveMigration  VirtualMachineInstanceMigrationMethod = "LiveMigration"
)

// MigrationNetworkType is the network migration data travels over.
type MigrationNetworkType string

// Migration network types.
const (
	MigrationNetworkPod       MigrationNetworkType = "Pod"
	MigrationNetworkMigration MigrationNetworkType = "Migration"
)

// MigrationConfiguration is the set of migration settings that applied to a migration (KubeVirt's
// cluster settings merged with a matching MigrationPolicy).
type MigrationConfiguration struct {
	// NodeDrainTaintKey is the node taint that triggers a drain.
	// +optional
	NodeDrainTaintKey *string `json:"nodeDrainTaintKey,omitempty"`
	// ParallelOutboundMigrationsPerNode caps outgoing migrations per node.
	// +optional
	ParallelOutboundMigrationsPerNode *uint32 `json:"parallelOutboundMigrationsPerNode,omitempty"`
	// ParallelMigrationsPerCluster caps migrations in the cluster.
	// +optional
	ParallelMigrationsPerCluster *uint32 `json:"parallelMigrationsPerCluster,omitempty"`
	// AllowAutoConverge lets the guest be slowed down so the migration converges.
	// +optional
	AllowAutoConverge *bool `json:"allowAutoConverge,omitempty"`
	// BandwidthPerMigration per second; 0 is unlimited.
	// +optional
	BandwidthPerMigration *resource.Quantity `json:"bandwidthPerMigration,omitempty"`
	// CompletionTimeoutPerGiB is the time allowed per GiB of guest memory, in seconds.
	// +optional
	CompletionTimeoutPerGiB *int64 `json:"completionTimeoutPerGiB,omitempty"`
	// MaxDowntimeMs is the longest pause allowed at switchover, in milliseconds.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2000000
	MaxDowntimeMs *uint64 `json:"maxDowntimeMs,omitempty"`
	// ProgressTimeout is how long a migration may make no progress, in seconds.
	// +optional
	ProgressTimeout *int64 `json:"progressTimeout,omitempty"`
	// UtilityVolumesTimeout is how long a migration waits for utility volumes to go, in seconds.
	// +optional
	UtilityVolumesTimeout *int64 `json:"utilityVolumesTimeout,omitempty"`
	// UnsafeMigrationOverride migrates even when it is deemed unsafe for the guest.
	// +optional
	UnsafeMigrationOverride *bool `json:"unsafeMigrationOverride,omitempty"`
	// AllowPostCopy lets a slow migration switch to post-copy.
	// +optional
	AllowPostCopy *bool `json:"allowPostCopy,omitempty"`
	// AllowWorkloadDisruption pauses or post-copies the guest instead of cancelling on timeout.
	// +optional
	AllowWorkloadDisruption *bool `json:"allowWorkloadDisruption,omitempty"`
	// DisableTLS sends migration data unencrypted.
	// +optional
	DisableTLS *bool `json:"disableTLS,omitempty"`
	// Network is the NetworkAttachmentDefinition migrations use instead of the Pod network.
	// +optional
	Network *string `json:"network,omitempty"`
	// MatchSELinuxLevelOnMigration lets the target get its own SELinux level.
	// +optional
	MatchSELinuxLevelOnMigration *bool `json:"matchSELinuxLevelOnMigration,omitempty"`
	// CrossClusterNetwork is the network synchronization controllers talk over.
	// +optional
	CrossClusterNetwork *string `json:"crossClusterNetwork,omitempty"`
	// DecentralizedLiveMigrationDatapath is Direct or Proxy.
	// +optional
	DecentralizedLiveMigrationDatapath *DecentralizedLiveMigrationDatapath `json:"decentralizedLiveMigrationDatapath,omitempty"`
	// Experimental tunables (alpha in KubeVirt).
	// +optional
	Experimental *ExperimentalMigrationOptions `json:"experimental,omitempty"`
}

// DecentralizedLiveMigrationDatapath is how data of a cross-namespace or cross-cluster migration moves.
//
// +kubebuilder:validation:Enum=Direct;Proxy
type DecentralizedLiveMigrationDatapath string

// ExperimentalMigrationOptions are experimental migration tunables.
type ExperimentalMigrationOptions struct {
	// StallDetector tunes stall detection.
	// +optional
	StallDetector *StallDetectorOptions `json:"stallDetector,omitempty"`
	// DowntimeTuning tunes how the allowed downtime grows.
	// +optional
	DowntimeTuning *DowntimeTuningOptions `json:"downtimeTuning,omitempty"`
	// Compression of the migration stream: none or zstd.
	// +optional
	// +kubebuilder:validation:Enum=none;zstd
	Compression *MigrationCompression `json:"compression,omitempty"`
}

// MigrationCompression is the compression of a migration stream.
type MigrationCompression string

// StallDetectorOptions tune how a stalled migration is detected.
type StallDetectorOptions struct {
	// StallMargin is the tolerance, in percent, for calling progress stalled.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	StallMargin *int64 `json:"stallMargin,omitempty"`
	// EwmaAlpha smooths the bandwidth estimate.
	// +optional
	EwmaAlpha *resource.Quantity `json:"ewmaAlpha,omitempty"`
	// StallProgressTimeout is the stall window, in seconds.
	// +optional
	// +kubebuilder:validation:Minimum=0
	StallProgressTimeout *int64 `json:"stallProgressTimeout,omitempty"`
	// SwitchoverTimeout is how long a switchover may take, in seconds.
	// +optional
	// +kubebuilder:validation:Minimum=0
	SwitchoverTimeout *int64 `json:"switchoverTimeout,omitempty"`
	// PrecopyPossibleFactor is how far estimated downtime may exceed the maximum before aborting.
	// +optional
	PrecopyPossibleFactor *resource.Quantity `json:"precopyPossibleFactor,omitempty"`
	// PatienceWindowDecayFactor shrinks the patience window after each relaxation.
	// +optional
	PatienceWindowDecayFactor *resource.Quantity `json:"patienceWindowDecayFactor,omitempty"`
	// SearchLocalMinima waits for a low point of remaining data before acting.
	// +optional
	SearchLocalMinima *bool `json:"searchLocalMinima,omitempty"`
	// CompletionTimeoutFactor scales the completion time budget.
	// +optional
	CompletionTimeoutFactor *resource.Quantity `json:"completionTimeoutFactor,omitempty"`
}

// DowntimeTuningOptions tune how the allowed downtime grows during a migration.
type DowntimeTuningOptions struct {
	// InitialMs is the first allowed downtime, in milliseconds.
	// +optional
	// +kubebuilder:validation:Minimum=1
	InitialMs *int64 `json:"initialMs,omitempty"`
	// Steps is the number of increases up to the maximum downtime.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Steps *int32 `json:"steps,omitempty"`
	// StartAfterIteration is the memory pass after which tuning starts.
	// +optional
	// +kubebuilder:validation:Minimum=1
	StartAfterIteration *int64 `json:"startAfterIteration,omitempty"`
	// CooldownSeconds is the least time between two increases.
	// +optional
	// +kubebuilder:validation:Minimum=1
	CooldownSeconds *int32 `json:"cooldownSeconds,omitempty"`
}
