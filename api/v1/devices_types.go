package v1

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
