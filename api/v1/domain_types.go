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

// Devices are the guest's devices.
type Devices struct {
	// Disks attached to the guest; each names a volume.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(d, self.exists_one(e, e.name == d.name))",message="disk names must be unique"
	Disks []Disk `json:"disks,omitempty"`
	// Interfaces attached to the guest; each names a network.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(i, self.exists_one(j, j.name == i.name))",message="interface names must be unique"
	Interfaces []Interface `json:"interfaces,omitempty"`
	// AutoattachGraphicsDevice adds a VNC display; defaults to true.
	// +optional
	AutoattachGraphicsDevice *bool `json:"autoattachGraphicsDevice,omitempty"`
	// AutoattachSerialConsole adds a serial console; defaults to true.
	// +optional
	AutoattachSerialConsole *bool `json:"autoattachSerialConsole,omitempty"`
	// AutoattachPodInterface adds the default pod network interface when none is declared; defaults to true.
	// +optional
	AutoattachPodInterface *bool `json:"autoattachPodInterface,omitempty"`
}

// Disk attaches a volume to the guest.
//
// +kubebuilder:validation:XValidation:rule="[has(self.disk), has(self.cdrom), has(self.lun)].filter(x, x).size() <= 1",message="a disk may set only one of disk, cdrom, lun"
type Disk struct {
	// Name of the volume this disk attaches.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Disk attaches the volume as a disk (the default).
	// +optional
	Disk *DiskTarget `json:"disk,omitempty"`
	// CDRom attaches the volume as a CD-ROM.
	// +optional
	CDRom *CDRomTarget `json:"cdrom,omitempty"`
	// LUN attaches the volume as a SCSI LUN.
	// +optional
	LUN *LunTarget `json:"lun,omitempty"`
	// BootOrder of this disk; lower boots first.
	// +optional
	// +kubebuilder:validation:Minimum=1
	BootOrder *uint `json:"bootOrder,omitempty"`
	// Serial number of the disk.
	// +optional
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.+-]*$`
	// +kubebuilder:validation:MaxLength=36
	Serial string `json:"serial,omitempty"`
	// Cache mode.
	// +optional
	// +kubebuilder:validation:Enum=none;writethrough;writeback
	Cache string `json:"cache,omitempty"`
}

// DiskBus is the bus a disk is attached to.
//
// +kubebuilder:validation:Enum=virtio;sata;scsi;usb
type DiskBus string

// Disk buses.
const (
	DiskBusVirtio DiskBus = "virtio"
	DiskBusSATA   DiskBus = "sata"
	DiskBusSCSI   DiskBus = "scsi"
	DiskBusUSB    DiskBus = "usb"
)

// DiskTarget attaches a volume as a disk.
type DiskTarget struct {
	// Bus; defaults to virtio.
	// +optional
	Bus DiskBus `json:"bus,omitempty"`
	// ReadOnly attaches the disk read-only.
	// +optional
	ReadOnly bool `json:"readonly,omitempty"`
	// PciAddress of the disk.
	// +optional
	PciAddress string `json:"pciAddress,omitempty"`
}

// CDRomTarget attaches a volume as a CD-ROM.
type CDRomTarget struct {
	// Bus; defaults to sata.
	// +optional
	Bus DiskBus `json:"bus,omitempty"`
	// ReadOnly defaults to true.
	// +optional
	ReadOnly *bool `json:"readonly,omitempty"`
	// Tray is open or closed; defaults to closed.
	// +optional
	// +kubebuilder:validation:Enum=open;closed
	Tray string `json:"tray,omitempty"`
}

// LunTarget attaches a volume as a SCSI LUN.
type LunTarget struct {
	// Bus; defaults to scsi.
	// +optional
	Bus DiskBus `json:"bus,omitempty"`
	// ReadOnly attaches the LUN read-only.
	// +optional
	ReadOnly bool `json:"readonly,omitempty"`
}

// Interface attaches a network to the guest.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.masquerade) && has(self.bridge))",message="an interface may set only one of masquerade, bridge"
type Interface struct {
	// Name of the network this interface attaches.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Model of the virtual NIC; defaults to virtio.
	// +optional
	// +kubebuilder:validation:Enum=e1000;e1000e;ne2k_pci;pcnet;rtl8139;virtio
	Model string `json:"model,omitempty"`
	// Masquerade connects the guest through NAT behind the Pod's address.
	// +optional
	Masquerade *InterfaceMasquerade `json:"masquerade,omitempty"`
	// Bridge connects the guest to the Pod network directly.
	// +optional
	Bridge *InterfaceBridge `json:"bridge,omitempty"`
	// Ports of the guest reachable at the Pod's address (masquerade); empty means all.
	// +optional
	Ports []Port `json:"ports,omitempty"`
	// MacAddress of the interface.
	// +optional
	// +kubebuilder:validation:Pattern=`^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$`
	MacAddress string `json:"macAddress,omitempty"`
	// BootOrder of this interface (network boot).
	// +optional
	// +kubebuilder:validation:Minimum=1
	BootOrder *uint `json:"bootOrder,omitempty"`
	// PciAddress of the interface.
	// +optional
	PciAddress string `json:"pciAddress,omitempty"`
}

// InterfaceMasquerade connects the guest through NAT behind the Pod's address.
type InterfaceMasquerade struct{}

// InterfaceBridge connects the guest to the Pod network directly.
type InterfaceBridge struct{}

// Port is a guest port reachable at the Pod's address.
type Port struct {
	// Name of the port.
	// +optional
	Name string `json:"name,omitempty"`
	// Protocol; defaults to TCP.
	// +optional
	// +kubebuilder:validation:Enum=TCP;UDP
	Protocol string `json:"protocol,omitempty"`
	// Port number.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}
