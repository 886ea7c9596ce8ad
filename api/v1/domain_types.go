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
	// CPU topology, model and placement.
	// +optional
	CPU *CPU `json:"cpu,omitempty"`
	// Memory of the guest.
	// +optional
	Memory *Memory `json:"memory,omitempty"`
	// Machine type.
	// +optional
	Machine *Machine `json:"machine,omitempty"`
	// Firmware: UUID, serial, bootloader, direct kernel boot and ACPI tables.
	// +optional
	Firmware *Firmware `json:"firmware,omitempty"`
	// Clock: guest clock offset and timers.
	// +optional
	Clock *Clock `json:"clock,omitempty"`
	// Features: ACPI, APIC, SMM, Hyper-V enlightenments and KVM options.
	// +optional
	Features *Features `json:"features,omitempty"`
	// Devices: disks, interfaces, console and graphics.
	// +optional
	Devices Devices `json:"devices,omitempty"`
	// IOThreadsPolicy selects how disks share IOThreads; unset means no IOThreads.
	// +optional
	IOThreadsPolicy *IOThreadsPolicy `json:"ioThreadsPolicy,omitempty"`
	// IOThreads tunes the IOThreads (used by the supplementalPool policy).
	// +optional
	IOThreads *DiskIOThreads `json:"ioThreads,omitempty"`
	// Chassis is the SMBIOS chassis information shown to the guest.
	// +optional
	Chassis *Chassis `json:"chassis,omitempty"`
	// LaunchSecurity configures confidential-computing launch (SEV, SEV-SNP, TDX).
	// +optional
	LaunchSecurity *LaunchSecurity `json:"launchSecurity,omitempty"`
	// RebootPolicy decides whether a guest-initiated reboot restarts the guest or ends the VMI.
	// +optional
	RebootPolicy *RebootPolicy `json:"rebootPolicy,omitempty"`
}

// IOThreadsPolicy is how disks are spread over IOThreads.
//
// +kubebuilder:validation:Enum=shared;auto;supplementalPool
type IOThreadsPolicy string

// IOThreads policies.
const (
	// IOThreadsPolicyShared puts all disks on one shared IOThread.
	IOThreadsPolicyShared IOThreadsPolicy = "shared"
	// IOThreadsPolicyAuto spreads disks over a pool sized from the vCPU count.
	IOThreadsPolicyAuto IOThreadsPolicy = "auto"
	// IOThreadsPolicySupplementalPool uses a pool of ioThreads.supplementalPoolThreadCount threads.
	IOThreadsPolicySupplementalPool IOThreadsPolicy = "supplementalPool"
)

// DiskIOThreads tunes the IOThreads given to disks.
type DiskIOThreads struct {
	// SupplementalPoolThreadCount is the pool size for the supplementalPool policy.
	// +optional
	SupplementalPoolThreadCount *uint32 `json:"supplementalPoolThreadCount,omitempty"`
}

// RebootPolicy is what happens when the guest reboots itself.
//
// +kubebuilder:validation:Enum=Reboot;Terminate
type RebootPolicy string

// Reboot policies.
const (
	// RebootPolicyReboot lets the guest reboot in place (the default).
	RebootPolicyReboot RebootPolicy = "Reboot"
	// RebootPolicyTerminate ends the VMI on a guest reboot so a controller can recreate it.
	RebootPolicyTerminate RebootPolicy = "Terminate"
)

// ResourceRequirements are the compute resources of a guest.
type ResourceRequirements struct {
	// Requests are the initial resources (cpu, memory) of the guest.
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
	// Limits cap the resources (cpu, memory) of the guest.
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
	// OvercommitGuestOverhead leaves the per-VM overhead out of the launcher Pod's requests.
	// +optional
	OvercommitGuestOverhead bool `json:"overcommitGuestOverhead,omitempty"`
}

// CPU is the guest's CPU topology, model and placement.
type CPU struct {
	// Cores per socket; defaults to 1.
	// +optional
	Cores uint32 `json:"cores,omitempty"`
	// Sockets; defaults to 1.
	// +optional
	Sockets uint32 `json:"sockets,omitempty"`
	// MaxSockets is the socket count vCPU hotplug may grow to.
	// +optional
	MaxSockets uint32 `json:"maxSockets,omitempty"`
	// Threads per core; defaults to 1.
	// +optional
	Threads uint32 `json:"threads,omitempty"`
	// Model of the virtual CPU (e.g. host-model, host-passthrough, or a libvirt model name).
	// +optional
	Model string `json:"model,omitempty"`
	// Features adds or removes individual CPU features.
	// +optional
	Features []CPUFeature `json:"features,omitempty"`
	// DedicatedCPUPlacement pins vCPUs to dedicated host CPUs.
	// +optional
	DedicatedCPUPlacement bool `json:"dedicatedCpuPlacement,omitempty"`
	// NUMA configures the guest NUMA topology.
	// +optional
	NUMA *NUMA `json:"numa,omitempty"`
	// IsolateEmulatorThread gives the emulator thread its own dedicated host CPU.
	// +optional
	IsolateEmulatorThread bool `json:"isolateEmulatorThread,omitempty"`
	// Realtime tunes the guest for low-latency workloads.
	// +optional
	Realtime *Realtime `json:"realtime,omitempty"`
}

// DefaultCPUFeaturePolicy is a CPU feature's policy when it names none.
const DefaultCPUFeaturePolicy = "require"

// CPUFeature turns one CPU feature on or off.
type CPUFeature struct {
	// Name of the feature (libvirt's name, e.g. vmx).
	Name string `json:"name"`
	// Policy for the feature; defaults to require.
	// +optional
	// +kubebuilder:validation:Enum="";force;require;optional;disable;forbid
	Policy string `json:"policy,omitempty"`
}

// NUMA is the guest NUMA configuration.
type NUMA struct {
	// GuestMappingPassthrough mirrors the host NUMA cells of the pinned CPUs into the guest.
	// +optional
	GuestMappingPassthrough *NUMAGuestMappingPassthrough `json:"guestMappingPassthrough,omitempty"`
}

// NUMAGuestMappingPassthrough selects a guest NUMA layout that follows the host's, with no settings.
type NUMAGuestMappingPassthrough struct{}

// Realtime holds realtime tuning.
type Realtime struct {
	// Mask is a libvirt vCPU set expression (e.g. "0-3,^1") naming the realtime vCPUs.
	// +optional
	Mask string `json:"mask,omitempty"`
}

// Memory is the guest's memory.
type Memory struct {
	// Hugepages backs guest memory with huge pages.
	// +optional
	Hugepages *Hugepages `json:"hugepages,omitempty"`
	// Guest is the memory the guest sees; defaults to resources.requests.memory.
	// +optional
	Guest *resource.Quantity `json:"guest,omitempty"`
	// MaxGuest is the memory the guest may grow to by hotplug.
	// +optional
	MaxGuest *resource.Quantity `json:"maxGuest,omitempty"`
}

// Hugepages selects huge-page backing.
type Hugepages struct {
	// PageSize of the huge pages, e.g. 2Mi or 1Gi.
	// +optional
	PageSize string `json:"pageSize,omitempty"`
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
	// Bootloader chooses BIOS or EFI.
	// +optional
	Bootloader *Bootloader `json:"bootloader,omitempty"`
	// Serial number reported to the guest.
	// +optional
	Serial string `json:"serial,omitempty"`
	// KernelBoot boots a kernel and initrd taken from a container image, without a bootloader.
	// +optional
	KernelBoot *KernelBoot `json:"kernelBoot,omitempty"`
	// ACPI supplies extra ACPI tables from Secrets.
	// +optional
	ACPI *ACPI `json:"acpi,omitempty"`
}

// Bootloader picks the guest firmware; at most one member is set.
type Bootloader struct {
	// BIOS firmware (the default).
	// +optional
	BIOS *BIOS `json:"bios,omitempty"`
	// EFI firmware (OVMF).
	// +optional
	EFI *EFI `json:"efi,omitempty"`
}

// BIOS configures legacy BIOS firmware.
type BIOS struct {
	// UseSerial sends BIOS output to the serial console.
	// +optional
	UseSerial *bool `json:"useSerial,omitempty"`
}

// EFI configures UEFI firmware.
type EFI struct {
	// SecureBoot uses Secure Boot firmware (needs SMM); defaults to true.
	// +optional
	SecureBoot *bool `json:"secureBoot,omitempty"`
	// Persistent keeps the EFI variable store across reboots; defaults to false.
	// +optional
	Persistent *bool `json:"persistent,omitempty"`
}

// ACPI names volumes whose Secrets hold ACPI table blobs.
type ACPI struct {
	// SlicNameRef is the name of a Secret volume holding a SLIC table.
	// +optional
	SlicNameRef string `json:"slicNameRef,omitempty"`
	// MsdmNameRef is the name of a Secret volume holding an MSDM table.
	// +optional
	MsdmNameRef string `json:"msdmNameRef,omitempty"`
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

// Chassis is SMBIOS chassis information.
type Chassis struct {
	// Manufacturer string.
	// +optional
	Manufacturer string `json:"manufacturer,omitempty"`
	// Version string.
	// +optional
	Version string `json:"version,omitempty"`
	// Serial number.
	// +optional
	Serial string `json:"serial,omitempty"`
	// Asset tag.
	// +optional
	Asset string `json:"asset,omitempty"`
	// Sku number.
	// +optional
	Sku string `json:"sku,omitempty"`
}

// SecureBootEnabled says whether EFI boots with Secure Boot: unless secureBoot is false (KubeVirt's
// default is on).
func (e *EFI) SecureBootEnabled() bool { return e.SecureBoot == nil || *e.SecureBoot }

// EFIPersistent reports whether the domain boots EFI with its variables kept across restarts.
func (d *DomainSpec) EFIPersistent() bool {
	fw := d.Firmware
	return fw != nil && fw.Bootloader != nil && fw.Bootloader.EFI != nil && fw.Bootloader.EFI.Persistent != nil && *fw.Bootloader.EFI.Persistent
}

// PersistentState reports whether the instance keeps state across restarts (a persistent TPM, or
// persistent EFI variables), on a claim its VM owns.
func (s *VirtualMachineInstanceSpec) PersistentState() bool {
	return s.Domain.Devices.TPMPersistent() || s.Domain.EFIPersistent()
}
