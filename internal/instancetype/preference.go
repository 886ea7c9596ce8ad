package instancetype

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	itv1beta1 "github.com/podvirt/podvirt/api/instancetype/v1beta1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// applyPreference fills what spec leaves unset with the preference's values: a preference never
// overrides the template. Every preferred value lands in an instance field, so admission's checks
// (and refusals) of that field apply to it too.
func applyPreference(p *itv1beta1.VirtualMachinePreferenceSpec, spec *virtv1.VirtualMachineInstanceSpec, annotations map[string]string) {
	d := &spec.Domain
	if p.CPU != nil && len(p.CPU.PreferredCPUFeatures) > 0 {
		if d.CPU == nil {
			d.CPU = &virtv1.CPU{}
		}
		if len(d.CPU.Features) == 0 {
			d.CPU.Features = append([]virtv1.CPUFeature(nil), p.CPU.PreferredCPUFeatures...)
		}
	}
	if p.Devices != nil {
		applyDevicePreferences(p.Devices, &d.Devices)
	}
	if f := p.Features; f != nil {
		if d.Features == nil {
			d.Features = &virtv1.Features{}
		}
		if f.PreferredAcpi != nil && d.Features.ACPI.Enabled == nil {
			d.Features.ACPI = *f.PreferredAcpi.DeepCopy()
		}
		setCopy(&d.Features.APIC, f.PreferredApic)
		setCopy(&d.Features.Hyperv, f.PreferredHyperv)
		setCopy(&d.Features.KVM, f.PreferredKvm)
		setCopy(&d.Features.Pvspinlock, f.PreferredPvspinlock)
		setCopy(&d.Features.SMM, f.PreferredSmm)
	}
	if fw := p.Firmware; fw != nil {
		applyFirmwarePreferences(fw, d)
	}
	if p.Machine != nil && p.Machine.PreferredMachineType != "" && (d.Machine == nil || d.Machine.Type == "") {
		d.Machine = &virtv1.Machine{Type: p.Machine.PreferredMachineType}
	}
	if c := p.Clock; c != nil && d.Clock == nil && (c.PreferredClockOffset != nil || c.PreferredTimer != nil) {
		d.Clock = &virtv1.Clock{}
		if c.PreferredClockOffset != nil {
			d.Clock.ClockOffset = *c.PreferredClockOffset.DeepCopy()
		}
		d.Clock.Timer = c.PreferredTimer.DeepCopy()
	}
	if p.PreferredSubdomain != nil && spec.Subdomain == "" {
		spec.Subdomain = *p.PreferredSubdomain
	}
	if p.PreferredTerminationGracePeriodSeconds != nil && spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr.To(*p.PreferredTerminationGracePeriodSeconds)
	}
	if p.PreferredArchitecture != nil && spec.Architecture == "" {
		spec.Architecture = *p.PreferredArchitecture
	}
	addMissing(annotations, p.Annotations)
}

func applyDevicePreferences(p *itv1beta1.DevicePreferences, d *virtv1.Devices) {
	setIfNil(&d.AutoattachGraphicsDevice, p.PreferredAutoattachGraphicsDevice)
	setIfNil(&d.AutoattachMemBalloon, p.PreferredAutoattachMemBalloon)
	setIfNil(&d.AutoattachPodInterface, p.PreferredAutoattachPodInterface)
	setIfNil(&d.AutoattachSerialConsole, p.PreferredAutoattachSerialConsole)
	setIfNil(&d.AutoattachInputDevice, p.PreferredAutoattachInputDevice)
	setIfNil(&d.UseVirtioTransitional, p.PreferredUseVirtioTransitional)
	setIfNil(&d.BlockMultiQueue, p.PreferredBlockMultiQueue)
	setIfNil(&d.NetworkInterfaceMultiQueue, p.PreferredNetworkInterfaceMultiQueue)
	setCopy(&d.Rng, p.PreferredRng)
	setCopy(&d.TPM, p.PreferredTPM)
	if p.PreferredDisableHotplug != nil && !d.DisableHotplug {
		d.DisableHotplug = *p.PreferredDisableHotplug
	}
	if p.PreferredSoundModel != "" && d.Sound != nil && d.Sound.Model == "" {
		d.Sound.Model = p.PreferredSoundModel
	}
	if p.PreferredVideoType != nil && d.Video == nil {
		d.Video = &virtv1.VideoDevice{Type: *p.PreferredVideoType}
	}
	if p.PreferredPanicDeviceModel != nil {
		for i := range d.PanicDevices {
			setIfNil(&d.PanicDevices[i].Model, p.PreferredPanicDeviceModel)
		}
	}
	for i := range d.GPUs {
		setCopy(&d.GPUs[i].VirtualGPUOptions, p.PreferredVirtualGPUOptions)
	}
	for i := range d.Inputs {
		in := &d.Inputs[i]
		if in.Bus == "" {
			in.Bus = p.PreferredInputBus
		}
		if in.Type == "" {
			in.Type = p.PreferredInputType
		}
	}
	for i := range d.Disks {
		applyDiskPreferences(p, &d.Disks[i])
	}
	for i := range d.Interfaces {
		iface := &d.Interfaces[i]
		if iface.Model == "" {
			iface.Model = p.PreferredInterfaceModel
		}
		if p.PreferredInterfaceMasquerade != nil && !hasBinding(iface) {
			iface.Masquerade = &virtv1.InterfaceMasquerade{}
		}
	}
}

func applyDiskPreferences(p *itv1beta1.DevicePreferences, disk *virtv1.Disk) {
	switch {
	case disk.CDRom != nil:
		if disk.CDRom.Bus == "" {
			disk.CDRom.Bus = p.PreferredCdromBus
		}
	case disk.LUN != nil:
		if disk.LUN.Bus == "" {
			disk.LUN.Bus = p.PreferredLunBus
		}
	case disk.Disk != nil:
		if disk.Disk.Bus == "" {
			disk.Disk.Bus = p.PreferredDiskBus
		}
	default:
		if p.PreferredDiskBus != "" {
			disk.Disk = &virtv1.DiskTarget{Bus: p.PreferredDiskBus}
		}
	}
	if disk.Cache == "" {
		disk.Cache = string(p.PreferredDiskCache)
	}
	if disk.IO == "" {
		disk.IO = p.PreferredDiskIO
	}
	setIfNil(&disk.DedicatedIOThread, p.PreferredDiskDedicatedIoThread)
	setCopy(&disk.BlockSize, p.PreferredDiskBlockSize)
}

func hasBinding(i *virtv1.Interface) bool {
	return i.Masquerade != nil || i.Bridge != nil || i.Slirp != nil || i.SRIOV != nil || i.Macvtap != nil ||
		i.Passt != nil || i.PasstBinding != nil || i.Binding != nil
}

func applyFirmwarePreferences(p *itv1beta1.FirmwarePreferences, d *virtv1.DomainSpec) {
	if d.Firmware == nil {
		d.Firmware = &virtv1.Firmware{}
	}
	if d.Firmware.Bootloader != nil {
		return
	}
	efi := p.PreferredEfi.DeepCopy()
	if efi == nil && p.DeprecatedPreferredUseEfi != nil && *p.DeprecatedPreferredUseEfi {
		efi = &virtv1.EFI{SecureBoot: p.DeprecatedPreferredUseSecureBoot}
	}
	switch {
	case efi != nil:
		d.Firmware.Bootloader = &virtv1.Bootloader{EFI: efi}
	case p.PreferredUseBios != nil && *p.PreferredUseBios:
		d.Firmware.Bootloader = &virtv1.Bootloader{BIOS: &virtv1.BIOS{UseSerial: p.PreferredUseBiosSerial}}
	}
}

// setCopy sets *dst to a deep copy of src when *dst is nil.
func setCopy[T any, P interface {
	*T
	DeepCopy() *T
}](dst *P, src P) {
	if *dst == nil && src != nil {
		*dst = src.DeepCopy()
	}
}

// setIfNil sets *dst to a copy of what src points to when *dst is nil (for scalars).
func setIfNil[T any](dst **T, src *T) {
	if *dst == nil && src != nil {
		v := *src
		*dst = &v
	}
}

// Requirements names what of spec (already expanded) falls short of the preference's
// requirements; at is spec's path.
func Requirements(p *itv1beta1.VirtualMachinePreferenceSpec, spec *virtv1.VirtualMachineInstanceSpec, at *field.Path) field.ErrorList {
	if p == nil || p.Requirements == nil {
		return nil
	}
	var errs field.ErrorList
	r := p.Requirements
	if r.CPU != nil && uint32(spec.Domain.VCPUs()) < r.CPU.Guest {
		errs = append(errs, field.Invalid(at.Child("domain", "cpu"), spec.Domain.VCPUs(),
			fmt.Sprintf("the preference requires at least %d vCPUs", r.CPU.Guest)))
	}
	if r.Memory != nil {
		if guest, err := spec.Domain.GuestMemory(); err == nil && guest.Cmp(r.Memory.Guest) < 0 {
			errs = append(errs, field.Invalid(at.Child("domain", "memory", "guest"), guest.String(),
				fmt.Sprintf("the preference requires at least %s of guest memory", r.Memory.Guest.String())))
		}
	}
	if r.Architecture != nil && spec.Architecture != "" && spec.Architecture != *r.Architecture {
		errs = append(errs, field.Invalid(at.Child("architecture"), spec.Architecture,
			fmt.Sprintf("the preference requires %s", *r.Architecture)))
	}
	return errs
}
