package v1beta1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// VirtualMachineInstancetype is a namespaced set of sizing and resource settings that
// VirtualMachines in its namespace can refer to.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=vminstancetype;vminstancetypes;vmf;vmfs
type VirtualMachineInstancetype struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec describes the instance type.
	Spec VirtualMachineInstancetypeSpec `json:"spec"`
}

// VirtualMachineInstancetypeList is a list of VirtualMachineInstancetypes.
//
// +kubebuilder:object:root=true
type VirtualMachineInstancetypeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineInstancetype `json:"items"`
}

// VirtualMachineClusterInstancetype is the cluster-scoped VirtualMachineInstancetype, usable from
// every namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Cluster,shortName=vmclusterinstancetype;vmclusterinstancetypes;vmcf;vmcfs
type VirtualMachineClusterInstancetype struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec describes the instance type.
	Spec VirtualMachineInstancetypeSpec `json:"spec"`
}

// VirtualMachineClusterInstancetypeList is a list of VirtualMachineClusterInstancetypes.
//
// +kubebuilder:object:root=true
type VirtualMachineClusterInstancetypeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineClusterInstancetype `json:"items"`
}

// VirtualMachineInstancetypeSpec is the spec shared by VirtualMachineInstancetype and
// VirtualMachineClusterInstancetype; cpu.guest and memory.guest are always required.
type VirtualMachineInstancetypeSpec struct {
	// NodeSelector is the node label selector the instance must be scheduled by.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// SchedulerName is the scheduler that places the instance; empty means the default scheduler.
	// +optional
	SchedulerName string `json:"schedulerName,omitempty"`

	// CPU holds the vCPU settings of the instance type.
	CPU CPUInstancetype `json:"cpu"`

	// Memory holds the memory settings of the instance type.
	Memory MemoryInstancetype `json:"memory"`

	// GPUs are the GPU devices the instance type attaches.
	// +optional
	// +listType=atomic
	GPUs []virtv1.GPU `json:"gpus,omitempty"`

	// HostDevices are the host devices the instance type attaches.
	// +optional
	// +listType=atomic
	HostDevices []virtv1.HostDevice `json:"hostDevices,omitempty"`

	// IOThreadsPolicy is how disks are spread over IOThreads.
	// +optional
	IOThreadsPolicy *virtv1.IOThreadsPolicy `json:"ioThreadsPolicy,omitempty"`

	// IOThreads tunes the IOThreads given to disks.
	// +optional
	IOThreads *virtv1.DiskIOThreads `json:"ioThreads,omitempty"`

	// LaunchSecurity is the confidential-computing configuration of the instance type.
	// +optional
	LaunchSecurity *virtv1.LaunchSecurity `json:"launchSecurity,omitempty"`

	// Annotations are applied to the VirtualMachineInstance; they conflict with differing values on the VM.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// CPUInstancetype is the vCPU part of an instance type.
type CPUInstancetype struct {
	// Guest is the number of vCPUs exposed to the guest; the topology comes from the preference.
	// +kubebuilder:validation:Minimum=1
	Guest uint32 `json:"guest"`

	// Model is the guest CPU model, such as host-passthrough or host-model (the default).
	// +optional
	Model *string `json:"model,omitempty"`

	// DedicatedCPUPlacement pins each vCPU to a dedicated host CPU.
	// +optional
	DedicatedCPUPlacement *bool `json:"dedicatedCPUPlacement,omitempty"`

	// NUMA configures the guest NUMA topology.
	// +optional
	NUMA *virtv1.NUMA `json:"numa,omitempty"`

	// IsolateEmulatorThread gives the emulator thread one more dedicated host CPU.
	// +optional
	IsolateEmulatorThread *bool `json:"isolateEmulatorThread,omitempty"`

	// Realtime tunes the instance for low-latency, real-time workloads.
	// +optional
	Realtime *virtv1.Realtime `json:"realtime,omitempty"`

	// MaxSockets is the number of sockets vCPUs may be hotplugged up to.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxSockets *uint32 `json:"maxSockets,omitempty"`
}

// MemoryInstancetype is the memory part of an instance type.
type MemoryInstancetype struct {
	// Guest is the amount of memory visible to the guest OS.
	Guest resource.Quantity `json:"guest"`

	// Hugepages backs guest memory with hugepages.
	// +optional
	Hugepages *virtv1.Hugepages `json:"hugepages,omitempty"`

	// OvercommitPercent lowers the pod's memory request by this percentage of guest memory.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	OvercommitPercent int `json:"overcommitPercent,omitempty"`

	// MaxGuest is the guest memory that may be hotplugged up to.
	// +optional
	MaxGuest *resource.Quantity `json:"maxGuest,omitempty"`
}
