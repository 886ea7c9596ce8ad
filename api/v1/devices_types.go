package v1

// Devices are the guest's devices.
type Devices struct {
	// UseVirtioTransitional selects legacy-compatible (transitional) virtio devices for old guests.
	// +optional
	UseVirtioTransitional *bool `json:"useVirtioTransitional,omitempty"`
	// DisableHotplug turns off disk hotplug for this guest.
	// +optional
	DisableHotplug bool `json:"disableHotplug,omitempty"`
	// Disks attached to the guest; each names a volume.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(d, self.exists_one(e, e.name == d.name))",message="disk names must be unique"
	Disks []Disk `json:"disks,omitempty"`
	// Watchdog is a hardware watchdog device for the guest.
	// +optional
	Watchdog *Watchdog `json:"watchdog,omitempty"`
	// Interfaces attached to the guest; each names a network.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(i, self.exists_one(j, j.name == i.name))",message="interface names must be unique"
	Interfaces []Interface `json:"interfaces,omitempty"`
	// Inputs are input devices such as a tablet.
	// +optional
	Inputs []Input `json:"inputs,omitempty"`
	// AutoattachPodInterface adds the default pod network interface when none is declared; defaults to true.
	// +optional
	AutoattachPodInterface *bool `json:"autoattachPodInterface,omitempty"`
	// AutoattachGraphicsDevice adds a VNC display; defaults to true.
	// +optional
	AutoattachGraphicsDevice *bool `json:"autoattachGraphicsDevice,omitempty"`
	// AutoattachSerialConsole adds a serial console; defaults to true.
	// +optional
	AutoattachSerialConsole *bool `json:"autoattachSerialConsole,omitempty"`
	// LogSerialConsole records the auto-attached serial console's output; defaults to the cluster setting.
	// +optional
	LogSerialConsole *bool `json:"logSerialConsole,omitempty"`
	// AutoattachMemBalloon adds a memory balloon device; defaults to true.
	// +optional
	AutoattachMemBalloon *bool `json:"autoattachMemBalloon,omitempty"`
	// AutoattachInputDevice adds an input device; defaults to false.
	// +optional
	AutoattachInputDevice *bool `json:"autoattachInputDevice,omitempty"`
	// AutoattachVSOCK gives the guest a VSOCK CID; defaults to false.
	// +optional
	AutoattachVSOCK *bool `json:"autoattachVSOCK,omitempty"`
	// Rng adds a random number generator fed from the host.
	// +optional
	Rng *Rng `json:"rng,omitempty"`
	// BlockMultiQueue turns on virtio multi-queue for block devices; defaults to false.
	// +optional
	BlockMultiQueue *bool `json:"blockMultiQueue,omitempty"`
	// NetworkInterfaceMultiQueue turns on vhost multi-queue for virtio network interfaces.
	// +optional
	NetworkInterfaceMultiQueue *bool `json:"networkInterfaceMultiqueue,omitempty"`
	// GPUs passed through to the guest.
	// +optional
	// +listType=atomic
	GPUs []GPU `json:"gpus,omitempty"`
	// DownwardMetrics exposes host and guest metrics to the guest over a virtio serial port.
	// +optional
	DownwardMetrics *DownwardMetrics `json:"downwardMetrics,omitempty"`
	// PanicDevices report guest crashes to the host.
	// +optional
	// +listType=atomic
	PanicDevices []PanicDevice `json:"panicDevices,omitempty"`
	// Filesystems shared into the guest.
	// +optional
	// +listType=atomic
	Filesystems []Filesystem `json:"filesystems,omitempty"`
	// HostDevices passed through to the guest.
	// +optional
	// +listType=atomic
	HostDevices []HostDevice `json:"hostDevices,omitempty"`
	// ClientPassthrough lets a client redirect devices (such as USB) into the guest.
	// +optional
	ClientPassthrough *ClientPassthroughDevices `json:"clientPassthrough,omitempty"`
	// Sound adds an emulated sound card.
	// +optional
	Sound *SoundDevice `json:"sound,omitempty"`
	// TPM adds an emulated TPM device.
	// +optional
	TPM *TPMDevice `json:"tpm,omitempty"`
	// Video configures the guest's video device.
	// +optional
	Video *VideoDevice `json:"video,omitempty"`
}

// Disk attaches a volume to the guest.
//
// +kubebuilder:validation:XValidation:rule="[has(self.disk), has(self.cdrom), has(self.lun)].filter(x, x).size() <= 1",message="a disk may set only one of disk, cdrom, lun"
type Disk struct {
	// Name of the volume this disk attaches: a DNS-1123 label (it names files and devices on the node).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
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
	// +kubebuilder:validation:MaxLength=256
	Serial string `json:"serial,omitempty"`
	// DedicatedIOThread gives this disk its own IO thread; defaults to false.
	// +optional
	DedicatedIOThread *bool `json:"dedicatedIOThread,omitempty"`
	// Cache mode.
	// +optional
	// +kubebuilder:validation:Enum=none;writethrough;writeback
	Cache string `json:"cache,omitempty"`
	// IO mode of the disk.
	// +optional
	IO DriverIO `json:"io,omitempty"`
	// Tag is passed to the guest with the disk's address in the config drive metadata.
	// +optional
	Tag string `json:"tag,omitempty"`
	// BlockSize presented to the guest for this disk.
	// +optional
	BlockSize *BlockSize `json:"blockSize,omitempty"`
	// Shareable lets several guests write the disk at once.
	// +optional
	Shareable *bool `json:"shareable,omitempty"`
	// ErrorPolicy on disk errors; defaults to stop.
	// +optional
	ErrorPolicy *DiskErrorPolicy `json:"errorPolicy,omitempty"`
	// ChangedBlockTracking turns on changed block tracking for this disk; defaults to false.
	// +optional
	ChangedBlockTracking *bool `json:"changedBlockTracking,omitempty"`
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

// DriverIO is a disk's IO mode.
//
// +kubebuilder:validation:Enum=native;threads
type DriverIO string

// Disk IO modes.
const (
	IONative  DriverIO = "native"
	IOThreads DriverIO = "threads"
)

// DiskErrorPolicy is what happens to the guest when its disk reports an error.
//
// +kubebuilder:validation:Enum=stop;ignore;report;enospace
type DiskErrorPolicy string

// Disk error policies.
const (
	DiskErrorPolicyStop     DiskErrorPolicy = "stop"
	DiskErrorPolicyIgnore   DiskErrorPolicy = "ignore"
	DiskErrorPolicyReport   DiskErrorPolicy = "report"
	DiskErrorPolicyEnospace DiskErrorPolicy = "enospace"
)

// BlockSize sets the block sizes a disk presents; set one of its members.
type BlockSize struct {
	// Custom sizes.
	// +optional
	Custom *CustomBlockSize `json:"custom,omitempty"`
	// MatchVolume takes the sizes from the backing volume.
	// +optional
	MatchVolume *FeatureState `json:"matchVolume,omitempty"`
}

// CustomBlockSize is an explicit logical and physical block size.
type CustomBlockSize struct {
	// Logical block size in bytes.
	// +optional
	Logical uint `json:"logical,omitempty"`
	// Physical block size in bytes.
	// +optional
	Physical uint `json:"physical,omitempty"`
	// DiscardGranularity in bytes.
	// +optional
	DiscardGranularity *uint `json:"discardGranularity,omitempty"`
}

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
	// Reservation turns on SCSI persistent reservation support for the LUN.
	// +optional
	Reservation bool `json:"reservation,omitempty"`
}

// Interface attaches a network to the guest.
//
// +kubebuilder:validation:XValidation:rule="[has(self.masquerade), has(self.bridge), has(self.slirp), has(self.sriov), has(self.macvtap), has(self.passt), has(self.passtBinding), has(self.binding)].filter(x, x).size() <= 1",message="an interface may set only one of masquerade, bridge, slirp, sriov, macvtap, passt, passtBinding, binding"
type Interface struct {
	// Name of the network this interface attaches: a DNS-1123 label (it names files and devices on the node).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Model of the virtual NIC; defaults to virtio.
	// +optional
	// +kubebuilder:validation:Enum=e1000;e1000e;igb;ne2k_pci;pcnet;rtl8139;virtio
	Model string `json:"model,omitempty"`
	// Bridge connects the guest to the Pod network directly.
	// +optional
	Bridge *InterfaceBridge `json:"bridge,omitempty"`
	// Slirp connects the guest through QEMU user-mode networking.
	//
	// Deprecated: no longer supported; kept so existing manifests still decode.
	// +optional
	Slirp *InterfaceSlirp `json:"slirp,omitempty"`
	// Masquerade connects the guest through NAT behind the Pod's address.
	// +optional
	Masquerade *InterfaceMasquerade `json:"masquerade,omitempty"`
	// SRIOV passes an SR-IOV virtual function through to the guest.
	// +optional
	SRIOV *InterfaceSRIOV `json:"sriov,omitempty"`
	// Macvtap connects the guest through a macvtap device.
	//
	// Deprecated: no longer supported; kept so existing manifests still decode.
	// +optional
	Macvtap *InterfaceMacvtap `json:"macvtap,omitempty"`
	// Passt connects the guest through passt user-mode networking.
	//
	// Deprecated: superseded by passtBinding or a binding plugin; kept so existing manifests still decode.
	// +optional
	Passt *InterfacePasst `json:"passt,omitempty"`
	// PasstBinding connects the guest through passt user-mode networking.
	// +optional
	PasstBinding *InterfacePasstBinding `json:"passtBinding,omitempty"`
	// Binding names a binding plugin that connects the guest, instead of a built-in method.
	// +optional
	Binding *PluginBinding `json:"binding,omitempty"`
	// Ports of the guest reachable at the Pod's address (masquerade); empty means all.
	// +optional
	Ports []Port `json:"ports,omitempty"`
	// MacAddress of the interface, such as de:ad:00:00:be:af.
	// +optional
	// +kubebuilder:validation:Pattern=`^(([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}|([0-9A-Fa-f]{4}\.){2}[0-9A-Fa-f]{4})$`
	MacAddress string `json:"macAddress,omitempty"`
	// BootOrder of this interface (network boot).
	// +optional
	// +kubebuilder:validation:Minimum=1
	BootOrder *uint `json:"bootOrder,omitempty"`
	// PciAddress of the interface.
	// +optional
	PciAddress string `json:"pciAddress,omitempty"`
	// DHCPOptions are extra options the interface's DHCP server hands the guest.
	// +optional
	DHCPOptions *DHCPOptions `json:"dhcpOptions,omitempty"`
	// Tag is passed to the guest with the interface's address in the config drive metadata.
	// +optional
	Tag string `json:"tag,omitempty"`
	// ACPIIndex gives the guest a stable device name independent of the PCI address.
	// +optional
	ACPIIndex int `json:"acpiIndex,omitempty"`
	// State requested for the interface; empty means up.
	// +optional
	State InterfaceState `json:"state,omitempty"`
}

// InterfaceState is the requested operational state of an interface.
//
// +kubebuilder:validation:Enum=absent;up;down
type InterfaceState string

// Interface states.
const (
	InterfaceStateAbsent   InterfaceState = "absent"
	InterfaceStateLinkUp   InterfaceState = "up"
	InterfaceStateLinkDown InterfaceState = "down"
)

// InterfaceMasquerade connects the guest through NAT behind the Pod's address.
type InterfaceMasquerade struct{}

// InterfaceBridge connects the guest to the Pod network directly.
type InterfaceBridge struct{}

// InterfaceSlirp connects the guest through QEMU user-mode networking (deprecated).
type InterfaceSlirp struct{}

// InterfaceSRIOV passes an SR-IOV virtual function through to the guest.
type InterfaceSRIOV struct{}

// InterfaceMacvtap connects the guest through a macvtap device (deprecated).
type InterfaceMacvtap struct{}

// InterfacePasst connects the guest through passt (deprecated form).
type InterfacePasst struct{}

// InterfacePasstBinding connects the guest through passt user-mode networking.
type InterfacePasstBinding struct{}

// PluginBinding names a network binding plugin.
type PluginBinding struct {
	// Name of the binding plugin as registered in the cluster configuration.
	Name string `json:"name"`
}

// DHCPOptions are extra options an interface's DHCP server hands the guest.
type DHCPOptions struct {
	// BootFileName is sent as DHCP option 67.
	// +optional
	BootFileName string `json:"bootFileName,omitempty"`
	// TFTPServerName is sent as DHCP option 66.
	// +optional
	TFTPServerName string `json:"tftpServerName,omitempty"`
	// NTPServers are sent as DHCP option 42.
	// +optional
	NTPServers []string `json:"ntpServers,omitempty"`
	// PrivateOptions are sent as private-use DHCP options.
	// +optional
	PrivateOptions []DHCPPrivateOptions `json:"privateOptions,omitempty"`
}

// DHCPPrivateOptions is one private-use DHCP option.
type DHCPPrivateOptions struct {
	// Option number, from the private-use range.
	// +kubebuilder:validation:Minimum=224
	// +kubebuilder:validation:Maximum=254
	Option int `json:"option"`
	// Value of the option.
	Value string `json:"value"`
}

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

// Watchdog is a named hardware watchdog; set one device kind (i6300esb is the default).
type Watchdog struct {
	// Name of the watchdog.
	Name string `json:"name"`
	// I6300ESB is an Intel 6300ESB watchdog.
	// +optional
	I6300ESB *I6300ESBWatchdog `json:"i6300esb,omitempty"`
	// Diag288 is the s390x diag288 watchdog.
	// +optional
	Diag288 *Diag288Watchdog `json:"diag288,omitempty"`
}

// WatchdogAction is what happens to the guest when its watchdog fires.
type WatchdogAction string

// Watchdog actions.
const (
	WatchdogActionPoweroff WatchdogAction = "poweroff"
	WatchdogActionReset    WatchdogAction = "reset"
	WatchdogActionShutdown WatchdogAction = "shutdown"
)

// I6300ESBWatchdog is an Intel 6300ESB watchdog.
type I6300ESBWatchdog struct {
	// Action when the watchdog fires, such as poweroff, reset or shutdown; defaults to reset.
	// +optional
	Action WatchdogAction `json:"action,omitempty"`
}

// Diag288Watchdog is the s390x diag288 watchdog.
type Diag288Watchdog struct {
	// Action when the watchdog fires, such as poweroff, reset or shutdown; defaults to reset.
	// +optional
	Action WatchdogAction `json:"action,omitempty"`
}

// InputBus is the bus an input device is attached to.
//
// +kubebuilder:validation:Enum=virtio;usb
type InputBus string

// Input buses.
const (
	InputBusUSB    InputBus = "usb"
	InputBusVirtio InputBus = "virtio"
)

// InputType is the kind of input device.
//
// +kubebuilder:validation:Enum=tablet;keyboard
type InputType string

// Input types.
const (
	InputTypeTablet   InputType = "tablet"
	InputTypeKeyboard InputType = "keyboard"
)

// Input is an emulated input device.
type Input struct {
	// Bus of the device.
	// +optional
	Bus InputBus `json:"bus,omitempty"`
	// Type of the device.
	Type InputType `json:"type"`
	// Name of the device.
	Name string `json:"name"`
}

// Rng is a random number generator fed from the host.
type Rng struct{}

// DownwardMetrics exposes host and guest metrics to the guest over a virtio serial port.
type DownwardMetrics struct{}

// ClientPassthroughDevices lets a client redirect devices (such as USB) into the guest.
type ClientPassthroughDevices struct{}

// GPU is a GPU passed through to the guest.
type GPU struct {
	// Name of the GPU in the guest.
	Name string `json:"name"`
	// DeviceName is the resource name a device plugin provides.
	// +optional
	DeviceName string `json:"deviceName,omitempty"`
	// ClaimName is the entry in spec.resourceClaims that allocates the device (DRA).
	// +optional
	ClaimName *string `json:"claimName,omitempty"`
	// RequestName is the request within that resource claim (DRA).
	// +optional
	RequestName *string `json:"requestName,omitempty"`
	// VirtualGPUOptions tune a mediated (virtual) GPU.
	// +optional
	VirtualGPUOptions *VGPUOptions `json:"virtualGPUOptions,omitempty"`
	// Tag is passed to the guest with the device's address in the config drive metadata.
	// +optional
	Tag string `json:"tag,omitempty"`
}

// VGPUOptions tune a mediated (virtual) GPU.
type VGPUOptions struct {
	// Display options of the virtual GPU.
	// +optional
	Display *VGPUDisplayOptions `json:"display,omitempty"`
}

// VGPUDisplayOptions configure a virtual GPU's display.
type VGPUDisplayOptions struct {
	// Enabled turns the vGPU-backed display on or off; defaults to true.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// RamFB adds a boot framebuffer used until the guest's GPU driver loads; defaults to on.
	// +optional
	RamFB *FeatureState `json:"ramFB,omitempty"`
}

// HostDevice is a host device passed through to the guest.
type HostDevice struct {
	// Name of the device in the guest.
	Name string `json:"name"`
	// DeviceName is the resource name a device plugin provides.
	// +optional
	DeviceName string `json:"deviceName,omitempty"`
	// ClaimName is the entry in spec.resourceClaims that allocates the device (DRA).
	// +optional
	ClaimName *string `json:"claimName,omitempty"`
	// RequestName is the request within that resource claim (DRA).
	// +optional
	RequestName *string `json:"requestName,omitempty"`
	// Tag is passed to the guest with the device's address in the config drive metadata.
	// +optional
	Tag string `json:"tag,omitempty"`
}

// PanicDeviceModel is the kind of panic device.
//
// +kubebuilder:validation:Enum=hyperv;isa;pvpanic
type PanicDeviceModel string

// Panic device models.
const (
	PanicDeviceModelHyperv  PanicDeviceModel = "hyperv"
	PanicDeviceModelISA     PanicDeviceModel = "isa"
	PanicDeviceModelPvpanic PanicDeviceModel = "pvpanic"
)

// PanicDevice reports guest crashes to the host.
type PanicDevice struct {
	// Model of the device; the default depends on the hypervisor and architecture.
	// +optional
	Model *PanicDeviceModel `json:"model,omitempty"`
}

// Filesystem is a filesystem shared into the guest.
type Filesystem struct {
	// Name of the filesystem; matches a volume.
	Name string `json:"name"`
	// Virtiofs shares the filesystem over virtiofs.
	Virtiofs *FilesystemVirtiofs `json:"virtiofs"`
}

// FilesystemVirtiofs shares a filesystem over virtiofs.
type FilesystemVirtiofs struct{}

// SoundDevice is an emulated sound card.
type SoundDevice struct {
	// Name of the sound device.
	Name string `json:"name"`
	// Model of the sound card; defaults to ich9.
	// +optional
	// +kubebuilder:validation:Enum=ich9;ac97
	Model string `json:"model,omitempty"`
}

// TPMDevice is an emulated TPM.
type TPMDevice struct {
	// Enabled can turn the TPM off even when a preference asks for one; defaults to true.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Persistent keeps the TPM state across restarts; defaults to false.
	// +optional
	Persistent *bool `json:"persistent,omitempty"`
}

// TPMEnabled reports whether the devices include a TPM: tpm is set and not disabled.
func (d *Devices) TPMEnabled() bool { return d.TPM != nil && (d.TPM.Enabled == nil || *d.TPM.Enabled) }

// TPMPersistent reports whether the TPM's state is kept across restarts.
func (d *Devices) TPMPersistent() bool {
	return d.TPMEnabled() && d.TPM.Persistent != nil && *d.TPM.Persistent
}

// VideoDevice configures the guest's video device.
type VideoDevice struct {
	// Type of the video device, such as virtio, vga, bochs or ramfb; the default depends on architecture and firmware.
	// +optional
	Type string `json:"type,omitempty"`
}
