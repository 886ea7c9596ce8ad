package v1beta1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// VirtualMachinePreference is a namespaced set of optional defaults that VirtualMachines in its
// namespace can refer to; values set on the VirtualMachine itself win.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=vmpref;vmprefs;vmp;vmps
type VirtualMachinePreference struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec describes the preferences.
	Spec VirtualMachinePreferenceSpec `json:"spec"`
}

// VirtualMachinePreferenceList is a list of VirtualMachinePreferences.
//
// +kubebuilder:object:root=true
type VirtualMachinePreferenceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachinePreference `json:"items"`
}

// VirtualMachineClusterPreference is the cluster-scoped VirtualMachinePreference, usable from
// every namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Cluster,shortName=vmcp;vmcps
type VirtualMachineClusterPreference struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec describes the preferences.
	Spec VirtualMachinePreferenceSpec `json:"spec"`
}

// VirtualMachineClusterPreferenceList is a list of VirtualMachineClusterPreferences.
//
// +kubebuilder:object:root=true
type VirtualMachineClusterPreferenceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineClusterPreference `json:"items"`
}

// VirtualMachinePreferenceSpec is the spec shared by VirtualMachinePreference and
// VirtualMachineClusterPreference; every field is optional.
type VirtualMachinePreferenceSpec struct {
	// Clock holds preferences for the domain's clock.
	// +optional
	Clock *ClockPreferences `json:"clock,omitempty"`

	// CPU holds preferences for the domain's CPU.
	// +optional
	CPU *CPUPreferences `json:"cpu,omitempty"`

	// Devices holds preferences for the domain's devices.
	// +optional
	Devices *DevicePreferences `json:"devices,omitempty"`

	// Features holds preferences for the domain's features.
	// +optional
	Features *FeaturePreferences `json:"features,omitempty"`

	// Firmware holds preferences for the domain's firmware.
	// +optional
	Firmware *FirmwarePreferences `json:"firmware,omitempty"`

	// Machine holds preferences for the domain's machine.
	// +optional
	Machine *MachinePreferences `json:"machine,omitempty"`

	// Volumes holds preferences for the VirtualMachine's volumes.
	// +optional
	Volumes *VolumePreferences `json:"volumes,omitempty"`

	// PreferredSubdomain is the preferred subdomain of the instance.
	// +optional
	PreferredSubdomain *string `json:"preferredSubdomain,omitempty"`

	// PreferredTerminationGracePeriodSeconds is the preferred grace period before a stopping instance is killed
	// (as the instance's own, at most a year).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31536000
	PreferredTerminationGracePeriodSeconds *int64 `json:"preferredTerminationGracePeriodSeconds,omitempty"`

	// Requirements are the minimum resources an instance type or VM must provide to use this preference.
	// +optional
	Requirements *PreferenceRequirements `json:"requirements,omitempty"`

	// Annotations are applied to the VirtualMachineInstance unless it already sets them.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// PreferSpreadSocketToCoreRatio is the sockets-to-cores ratio of the spread topology; defaults to 2.
	// +optional
	PreferSpreadSocketToCoreRatio uint32 `json:"preferSpreadSocketToCoreRatio,omitempty"`

	// PreferredArchitecture is the preferred guest architecture of the VirtualMachine.
	// +optional
	PreferredArchitecture *string `json:"preferredArchitecture,omitempty"`
}

// VolumePreferences holds preferences for a VirtualMachine's volumes.
type VolumePreferences struct {
	// PreferredStorageClassName is the preferred StorageClass of new volumes.
	// +optional
	PreferredStorageClassName string `json:"preferredStorageClassName,omitempty"`
}

// PreferredCPUTopology is how guest vCPUs are laid out over sockets, cores and threads.
//
// +kubebuilder:validation:Enum=preferCores;preferSockets;preferThreads;preferSpread;preferAny;cores;sockets;threads;spread;any
type PreferredCPUTopology string

// CPU topologies.
const (
	// Sockets exposes each vCPU as a socket; this is the default.
	Sockets PreferredCPUTopology = "sockets"
	// Cores exposes vCPUs as cores of one socket.
	Cores PreferredCPUTopology = "cores"
	// Threads exposes vCPUs as threads of one core.
	Threads PreferredCPUTopology = "threads"
	// Spread spreads vCPUs over sockets and cores (or threads) following spreadOptions.
	Spread PreferredCPUTopology = "spread"
	// Any keeps the topology the VirtualMachine sets, falling back to sockets.
	Any PreferredCPUTopology = "any"

	// DeprecatedPreferSockets is the older spelling of Sockets.
	DeprecatedPreferSockets PreferredCPUTopology = "preferSockets"
	// DeprecatedPreferCores is the older spelling of Cores.
	DeprecatedPreferCores PreferredCPUTopology = "preferCores"
	// DeprecatedPreferThreads is the older spelling of Threads.
	DeprecatedPreferThreads PreferredCPUTopology = "preferThreads"
	// DeprecatedPreferSpread is the older spelling of Spread.
	DeprecatedPreferSpread PreferredCPUTopology = "preferSpread"
	// DeprecatedPreferAny is the older spelling of Any.
	DeprecatedPreferAny PreferredCPUTopology = "preferAny"
)

// CPUPreferences holds preferences for the domain's CPU.
type CPUPreferences struct {
	// PreferredCPUTopology is the preferred guest CPU topology; defaults to sockets.
	// +optional
	PreferredCPUTopology *PreferredCPUTopology `json:"preferredCPUTopology,omitempty"`

	// SpreadOptions tunes the spread topology.
	// +optional
	SpreadOptions *SpreadOptions `json:"spreadOptions,omitempty"`

	// PreferredCPUFeatures are CPU features the guest should get enabled or disabled.
	// +optional
	PreferredCPUFeatures []virtv1.CPUFeature `json:"preferredCPUFeatures,omitempty"`
}

// SpreadAcross names the topology levels vCPUs are spread over.
//
// +kubebuilder:validation:Enum=SocketsCoresThreads;SocketsCores;CoresThreads
type SpreadAcross string

// Spread targets.
const (
	// SpreadAcrossSocketsCoresThreads spreads vCPUs over sockets, cores and threads.
	SpreadAcrossSocketsCoresThreads SpreadAcross = "SocketsCoresThreads"
	// SpreadAcrossSocketsCores spreads vCPUs over sockets and cores.
	SpreadAcrossSocketsCores SpreadAcross = "SocketsCores"
	// SpreadAcrossCoresThreads spreads vCPUs over cores and threads.
	SpreadAcrossCoresThreads SpreadAcross = "CoresThreads"
)

// SpreadOptions tunes the spread CPU topology.
type SpreadOptions struct {
	// Across is the levels vCPUs are spread over; defaults to SocketsCores.
	// +optional
	Across *SpreadAcross `json:"across,omitempty"`

	// Ratio is the ratio vCPUs are spread with (sockets:cores, or cores:threads which must be 2); defaults to 2.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Ratio *uint32 `json:"ratio,omitempty"`
}

// PreferenceRequirements are the minimum resources a preference needs.
type PreferenceRequirements struct {
	// CPU is the minimum vCPU requirement.
	// +optional
	CPU *CPUPreferenceRequirement `json:"cpu,omitempty"`

	// Memory is the minimum memory requirement.
	// +optional
	Memory *MemoryPreferenceRequirement `json:"memory,omitempty"`

	// Architecture is the guest architecture a VirtualMachine must have to use the preference.
	// +optional
	Architecture *string `json:"architecture,omitempty"`
}

// CPUPreferenceRequirement is the minimum vCPU count a preference needs.
type CPUPreferenceRequirement struct {
	// Guest is the minimum number of vCPUs.
	Guest uint32 `json:"guest"`
}

// MemoryPreferenceRequirement is the minimum guest memory a preference needs.
type MemoryPreferenceRequirement struct {
	// Guest is the minimum amount of guest memory.
	Guest resource.Quantity `json:"guest"`
}
