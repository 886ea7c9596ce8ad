package v1beta1

import (
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// DevicePreferences holds preferences for the domain's devices.
type DevicePreferences struct {
	// PreferredAutoattachGraphicsDevice is the preferred devices.autoattachGraphicsDevice.
	// +optional
	PreferredAutoattachGraphicsDevice *bool `json:"preferredAutoattachGraphicsDevice,omitempty"`

	// PreferredAutoattachMemBalloon is the preferred devices.autoattachMemBalloon.
	// +optional
	PreferredAutoattachMemBalloon *bool `json:"preferredAutoattachMemBalloon,omitempty"`

	// PreferredAutoattachPodInterface is the preferred devices.autoattachPodInterface.
	// +optional
	PreferredAutoattachPodInterface *bool `json:"preferredAutoattachPodInterface,omitempty"`

	// PreferredAutoattachSerialConsole is the preferred devices.autoattachSerialConsole.
	// +optional
	PreferredAutoattachSerialConsole *bool `json:"preferredAutoattachSerialConsole,omitempty"`

	// PreferredAutoattachInputDevice is the preferred devices.autoattachInputDevice.
	// +optional
	PreferredAutoattachInputDevice *bool `json:"preferredAutoattachInputDevice,omitempty"`

	// PreferredDisableHotplug is the preferred devices.disableHotplug.
	// +optional
	PreferredDisableHotplug *bool `json:"preferredDisableHotplug,omitempty"`

	// PreferredVirtualGPUOptions is the preferred virtualGPUOptions of GPUs.
	// +optional
	PreferredVirtualGPUOptions *virtv1.VGPUOptions `json:"preferredVirtualGPUOptions,omitempty"`

	// PreferredSoundModel is the preferred model of sound devices.
	// +optional
	PreferredSoundModel string `json:"preferredSoundModel,omitempty"`

	// PreferredUseVirtioTransitional is the preferred devices.useVirtioTransitional.
	// +optional
	PreferredUseVirtioTransitional *bool `json:"preferredUseVirtioTransitional,omitempty"`

	// PreferredInputBus is the preferred bus of input devices.
	// +optional
	PreferredInputBus virtv1.InputBus `json:"preferredInputBus,omitempty"`

	// PreferredInputType is the preferred type of input devices.
	// +optional
	PreferredInputType virtv1.InputType `json:"preferredInputType,omitempty"`

	// PreferredDiskBus is the preferred bus of disk-type disks.
	// +optional
	PreferredDiskBus virtv1.DiskBus `json:"preferredDiskBus,omitempty"`

	// PreferredLunBus is the preferred bus of LUN-type disks.
	// +optional
	PreferredLunBus virtv1.DiskBus `json:"preferredLunBus,omitempty"`

	// PreferredCdromBus is the preferred bus of CD-ROM-type disks.
	// +optional
	PreferredCdromBus virtv1.DiskBus `json:"preferredCdromBus,omitempty"`

	// PreferredDiskDedicatedIoThread gives virtio disks their own IO thread.
	// +optional
	PreferredDiskDedicatedIoThread *bool `json:"preferredDiskDedicatedIoThread,omitempty"`

	// PreferredDiskCache is the preferred cache mode of disks.
	// +optional
	PreferredDiskCache DriverCache `json:"preferredDiskCache,omitempty"`

	// PreferredDiskIO is the preferred IO mode of disks.
	// +optional
	PreferredDiskIO virtv1.DriverIO `json:"preferredDiskIO,omitempty"`

	// PreferredDiskBlockSize is the preferred block size of disks.
	// +optional
	PreferredDiskBlockSize *virtv1.BlockSize `json:"preferredDiskBlockSize,omitempty"`

	// PreferredInterfaceModel is the preferred model of network interfaces.
	// +optional
	PreferredInterfaceModel string `json:"preferredInterfaceModel,omitempty"`

	// PreferredRng attaches a random number generator device.
	// +optional
	PreferredRng *virtv1.Rng `json:"preferredRng,omitempty"`

	// PreferredBlockMultiQueue enables multi-queue for virtio disks.
	// +optional
	PreferredBlockMultiQueue *bool `json:"preferredBlockMultiQueue,omitempty"`

	// PreferredNetworkInterfaceMultiQueue enables multi-queue for virtio interfaces.
	// +optional
	PreferredNetworkInterfaceMultiQueue *bool `json:"preferredNetworkInterfaceMultiQueue,omitempty"`

	// PreferredTPM is the preferred TPM device.
	// +optional
	PreferredTPM *virtv1.TPMDevice `json:"preferredTPM,omitempty"`

	// PreferredInterfaceMasquerade is the preferred masquerade binding of network interfaces.
	// +optional
	PreferredInterfaceMasquerade *virtv1.InterfaceMasquerade `json:"preferredInterfaceMasquerade,omitempty"`

	// PreferredPanicDeviceModel is the preferred model of panic devices.
	// +optional
	PreferredPanicDeviceModel *virtv1.PanicDeviceModel `json:"preferredPanicDeviceModel,omitempty"`

	// PreferredVideoType is the preferred type of the video device.
	// +optional
	PreferredVideoType *string `json:"preferredVideoType,omitempty"`
}

// DriverCache is a disk's cache mode; kubevirt.io/v1 keeps it as a plain string in disks[].cache.
//
// +kubebuilder:validation:Enum=none;writethrough;writeback
type DriverCache string

// Disk cache modes.
const (
	// CacheNone bypasses the host page cache.
	CacheNone DriverCache = "none"
	// CacheWriteThrough writes through the host page cache.
	CacheWriteThrough DriverCache = "writethrough"
	// CacheWriteBack writes back through the host page cache.
	CacheWriteBack DriverCache = "writeback"
)

// FeaturePreferences holds preferences for the domain's features.
type FeaturePreferences struct {
	// PreferredAcpi is the preferred ACPI feature state.
	// +optional
	PreferredAcpi *virtv1.FeatureState `json:"preferredAcpi,omitempty"`

	// PreferredApic is the preferred APIC feature.
	// +optional
	PreferredApic *virtv1.FeatureAPIC `json:"preferredApic,omitempty"`

	// PreferredHyperv is the preferred set of Hyper-V enlightenments.
	// +optional
	PreferredHyperv *virtv1.FeatureHyperv `json:"preferredHyperv,omitempty"`

	// PreferredKvm is the preferred KVM feature settings.
	// +optional
	PreferredKvm *virtv1.FeatureKVM `json:"preferredKvm,omitempty"`

	// PreferredPvspinlock is the preferred paravirtual spinlock feature state.
	// +optional
	PreferredPvspinlock *virtv1.FeatureState `json:"preferredPvspinlock,omitempty"`

	// PreferredSmm is the preferred SMM feature state.
	// +optional
	PreferredSmm *virtv1.FeatureState `json:"preferredSmm,omitempty"`
}

// FirmwarePreferences holds preferences for the domain's firmware.
type FirmwarePreferences struct {
	// PreferredUseBios boots the guest with BIOS.
	// +optional
	PreferredUseBios *bool `json:"preferredUseBios,omitempty"`

	// PreferredUseBiosSerial sends BIOS output to the serial console; needs preferredUseBios.
	// +optional
	PreferredUseBiosSerial *bool `json:"preferredUseBiosSerial,omitempty"`

	// DeprecatedPreferredUseEfi boots the guest with EFI; use preferredEfi instead.
	// +optional
	DeprecatedPreferredUseEfi *bool `json:"preferredUseEfi,omitempty"`

	// DeprecatedPreferredUseSecureBoot enables EFI Secure Boot; use preferredEfi instead.
	// +optional
	DeprecatedPreferredUseSecureBoot *bool `json:"preferredUseSecureBoot,omitempty"`

	// PreferredEfi is the preferred EFI configuration.
	// +optional
	PreferredEfi *virtv1.EFI `json:"preferredEfi,omitempty"`
}

// MachinePreferences holds preferences for the domain's machine.
type MachinePreferences struct {
	// PreferredMachineType is the preferred machine type, such as q35.
	// +optional
	PreferredMachineType string `json:"preferredMachineType,omitempty"`
}

// ClockPreferences holds preferences for the domain's clock.
type ClockPreferences struct {
	// PreferredClockOffset is the preferred UTC offset or timezone of the guest clock.
	// +optional
	PreferredClockOffset *virtv1.ClockOffset `json:"preferredClockOffset,omitempty"`

	// PreferredTimer is the preferred set of guest timers.
	// +optional
	PreferredTimer *virtv1.Timer `json:"preferredTimer,omitempty"`
}
