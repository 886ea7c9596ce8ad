package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// DomainSpec is the virtual hardware of a guest.
type DomainSpec struct {
	// Resources requested for the guest; requests.memory is the guest memory unless memory.guest is set.
	// +optional
	Resources ResourceRequirements `json:"resources,omitempty"`
	// CPU topology.
	// +optional
	CPU *CPU `json:"cpu,omitempty"`
	// Memory of the guest.
	// +optional
	Memory *Memory `json:"memory,omitempty"`
	// Machine type.
	// +optional
	Machine *Machine `json:"machine,omitempty"`
	// Firmware: UUID, serial and direct kernel boot.
	// +optional
	Firmware *Firmware `json:"firmware,omitempty"`
	// Features: ACPI, APIC, SMM.
	// +optional
	Features *Features `json:"features,omitempty"`
	// Devices: disks, interfaces, console and graphics.
	// +optional
	Devices Devices `json:"devices,omitempty"`
}

// ResourceRequirements are the compute resources of a guest.
type ResourceRequirements struct {
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
	// OvercommitGuestOverhead leaves the per-VM overhead out of the launcher Pod's requests.
	// +optional
	OvercommitGuestOverhead bool `json:"overcommitGuestOverhead,omitempty"`
}

// CPU is the guest's CPU topology.
type CPU struct {
	// Cores per socket; defaults to 1.
	// +optional
	Cores uint32 `json:"cores,omitempty"`
	// Sockets; defaults to 1.
	// +optional
	Sockets uint32 `json:"sockets,omitempty"`
	// Threads per core; defaults to 1.
	// +optional
	Threads uint32 `json:"threads,omitempty"`
	// Model of the virtual CPU (e.g. host-model, host-passthrough).
	// +optional
	Model string `json:"model,omitempty"`
	// DedicatedCPUPlacement pins vCPUs to dedicated host CPUs.
	// +optional
	DedicatedCPUPlacement bool `json:"dedicatedCpuPlacement,omitempty"`
}

// Memory is the guest's memory.
type Memory struct {
	// Guest is the memory the guest sees; defaults to resources.requests.memory.
	// +optional
	Guest *resource.Quantity `json:"guest,omitempty"`
}

// Machine is the emulated machine type.
type Machine struct {
	// Type, e.g. q35; empty means the default.
	// +optional
	Type string `json:"type"`
}

// Firmware describes the guest's firmware.
type Firmware struct {
	// UUID reported to the guest; derived from the VirtualMachine when empty, so it is stable across
	// restarts.
	// +optional
	UUID types.UID `json:"uuid,omitempty"`
	// Serial number reported to the guest.
	// +optional
	Serial string `json:"serial,omitempty"`
	// KernelBoot boots a kernel and initrd taken from a container image, without a bootloader.
	// +optional
	KernelBoot *KernelBoot `json:"kernelBoot,omitempty"`
}

// KernelBoot boots the guest directly from a kernel (and optional initrd).
type KernelBoot struct {
	// KernelArgs is the kernel command line.
	// +optional
	KernelArgs string `json:"kernelArgs,omitempty"`
	// Container holds the kernel and initrd.
	// +optional
	Container *KernelBootContainer `json:"container,omitempty"`
}

// KernelBootContainer is a container image holding a kernel and an initrd.
//
// +kubebuilder:validation:XValidation:rule="has(self.kernelPath) || has(self.initrdPath)",message="kernelBoot.container needs kernelPath or initrdPath"
type KernelBootContainer struct {
	// Image holding the files.
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`
	// ImagePullSecret names a Secret for pulling the image.
	// +optional
	ImagePullSecret string `json:"imagePullSecret,omitempty"`
	// KernelPath is the kernel's absolute path in the image.
	// +optional
	KernelPath string `json:"kernelPath,omitempty"`
	// InitrdPath is the initrd's absolute path in the image.
	// +optional
	InitrdPath string `json:"initrdPath,omitempty"`
	// ImagePullPolicy of the image.
	// +optional
	// +kubebuilder:validation:Enum=Always;Never;IfNotPresent
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
}

// Features are hypervisor features exposed to the guest.
type Features struct {
	// ACPI, enabled by default; needed for graceful shutdown.
	// +optional
	ACPI FeatureState `json:"acpi,omitempty"`
	// APIC.
	// +optional
	APIC *FeatureState `json:"apic,omitempty"`
	// SMM (System Management Mode).
	// +optional
	SMM *FeatureState `json:"smm,omitempty"`
}

// FeatureState turns a feature on or off.
type FeatureState struct {
	// Enabled defaults to true.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

