package domainxml

import (
	"path/filepath"
	"strconv"

	"libvirt.org/go/libvirtxml"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// The host entropy source behind a virtio-rng device.
const rngSource = "/dev/urandom"

// GuestAgentChannel is the name of the virtio-serial port the qemu guest agent listens on in the
// guest. Every domain has it; libvirt owns the host side (launcherv1.GuestAgentSocket: libvirt's
// default path, under its root, can pass the 107 bytes a socket path may have) and is the only one
// talking to the agent.
const GuestAgentChannel = "org.qemu.guest_agent.0"

// addDevices adds the guest agent's channel and the optional devices a spec asks for: virtio-rng, a
// watchdog, input devices, a TPM and the memory balloon (none unless autoattachMemBalloon: it costs
// memory and nothing here uses it).
func addDevices(dom *libvirtxml.Domain, d *virtv1.Devices, privateDir string) {
	devs := dom.Devices
	devs.Channels = []libvirtxml.DomainChannel{{
		Source: &libvirtxml.DomainChardevSource{UNIX: &libvirtxml.DomainChardevSourceUNIX{Mode: "bind", Path: filepath.Join(privateDir, launcherv1.GuestAgentSocket)}},
		Target: &libvirtxml.DomainChannelTarget{VirtIO: &libvirtxml.DomainChannelTargetVirtIO{Name: GuestAgentChannel}},
	}}
	if d.Rng != nil {
		devs.RNGs = []libvirtxml.DomainRNG{{
			Model:   "virtio",
			Backend: &libvirtxml.DomainRNGBackend{Random: &libvirtxml.DomainRNGBackendRandom{Device: rngSource}},
		}}
	}
	if w := d.Watchdog; w != nil && w.I6300ESB != nil {
		action := w.I6300ESB.Action
		if action == "" {
			action = virtv1.WatchdogActionReset
		}
		devs.Watchdogs = []libvirtxml.DomainWatchdog{{Model: "i6300esb", Action: string(action)}}
	}
	for _, in := range d.Inputs {
		bus := in.Bus
		if bus == "" {
			bus = virtv1.InputBusUSB
		}
		devs.Inputs = append(devs.Inputs, libvirtxml.DomainInput{Type: string(in.Type), Bus: string(bus)})
	}
	if len(d.Inputs) == 0 && d.AutoattachInputDevice != nil && *d.AutoattachInputDevice {
		devs.Inputs = []libvirtxml.DomainInput{{Type: string(virtv1.InputTypeTablet), Bus: string(virtv1.InputBusUSB)}}
	}
	if d.TPMEnabled() {
		// A TPM 2.0 emulated by swtpm, which libvirt starts beside qemu. Its state lives under the
		// embedded driver's root: new on every start, unless persistent (the launcher links it to the
		// persistent state volume, and libvirt must not delete it when the domain goes).
		emulator := &libvirtxml.DomainTPMBackendEmulator{Version: "2.0"}
		if d.TPMPersistent() {
			emulator.PersistentState = "yes"
		}
		devs.TPMs = []libvirtxml.DomainTPM{{Model: "tpm-tis", Backend: &libvirtxml.DomainTPMBackend{Emulator: emulator}}}
	}
	devs.MemBalloon = &libvirtxml.DomainMemBalloon{Model: "none"}
	if d.AutoattachMemBalloon != nil && *d.AutoattachMemBalloon {
		devs.MemBalloon = &libvirtxml.DomainMemBalloon{Model: "virtio"}
	}
}

// setClock sets the guest's clock offset (UTC with an adjustment, or a timezone) and its timers
// (hpet, pit, rtc, the Hyper-V reference clock), keeping a timer setFeatures added.
func setClock(dom *libvirtxml.Domain, c *virtv1.Clock) {
	if c == nil {
		return
	}
	clock := &libvirtxml.DomainClock{Offset: "utc"}
	switch {
	case c.Timezone != nil:
		clock = &libvirtxml.DomainClock{Offset: "timezone", TimeZone: string(*c.Timezone)}
	case c.UTC != nil && c.UTC.OffsetSeconds != nil:
		clock = &libvirtxml.DomainClock{Offset: "variable", Basis: "utc", Adjustment: strconv.Itoa(*c.UTC.OffsetSeconds)}
	}
	if t := c.Timer; t != nil {
		if t.HPET != nil {
			clock.Timer = append(clock.Timer, libvirtxml.DomainTimer{Name: "hpet", TickPolicy: string(t.HPET.TickPolicy), Present: present(t.HPET.Enabled)})
		}
		if t.PIT != nil {
			clock.Timer = append(clock.Timer, libvirtxml.DomainTimer{Name: "pit", TickPolicy: string(t.PIT.TickPolicy), Present: present(t.PIT.Enabled)})
		}
		if t.RTC != nil {
			clock.Timer = append(clock.Timer, libvirtxml.DomainTimer{Name: "rtc", TickPolicy: string(t.RTC.TickPolicy), Track: string(t.RTC.Track), Present: present(t.RTC.Enabled)})
		}
		if t.Hyperv != nil {
			clock.Timer = append(clock.Timer, libvirtxml.DomainTimer{Name: "hypervclock", Present: present(t.Hyperv.Enabled)})
		}
	}
	if prev := dom.Clock; prev != nil && (c.Timer == nil || c.Timer.Hyperv == nil) {
		clock.Timer = append(clock.Timer, prev.Timer...) // the Hyper-V clock the synthetic timer needs
	}
	dom.Clock = clock
}

// present is a timer's present attribute: yes unless turned off.
func present(enabled *bool) string {
	if enabled != nil && !*enabled {
		return "no"
	}
	return "yes"
}

// chassis is the SMBIOS chassis table, nil when the spec sets none of it.
func chassis(c *virtv1.Chassis) *libvirtxml.DomainSysInfoChassis {
	if c == nil {
		return nil
	}
	var entries []libvirtxml.DomainSysInfoEntry
	for _, e := range []struct{ name, value string }{
		{"manufacturer", c.Manufacturer}, {"version", c.Version}, {"serial", c.Serial}, {"asset", c.Asset}, {"sku", c.Sku},
	} {
		if e.value != "" {
			entries = append(entries, libvirtxml.DomainSysInfoEntry{Name: e.name, Value: e.value})
		}
	}
	if len(entries) == 0 {
		return nil
	}
	return &libvirtxml.DomainSysInfoChassis{Entry: entries}
}

// setBootloader picks the firmware: SeaBIOS (the default; useSerial shows its output on the serial
// console) or OVMF. For EFI libvirt chooses the OVMF build from the firmware descriptors in the
// launcher image by the features asked for: Secure Boot (KubeVirt's default for efi) means the
// build with Microsoft's keys enrolled, which needs SMM (setFeatures turns it on); without it the
// plain build.
func setBootloader(dom *libvirtxml.Domain, b *virtv1.Bootloader) {
	switch {
	case b.EFI != nil:
		secure := b.EFI.SecureBootEnabled()
		dom.OS.Firmware = "efi"
		dom.OS.FirmwareInfo = &libvirtxml.DomainOSFirmwareInfo{Features: []libvirtxml.DomainOSFirmwareFeature{
			{Name: "enrolled-keys", Enabled: yesNo(secure)},
			{Name: "secure-boot", Enabled: yesNo(secure)},
		}}
	case b.BIOS != nil && b.BIOS.UseSerial != nil && *b.BIOS.UseSerial:
		dom.OS.BIOS = &libvirtxml.DomainBIOS{UseSerial: "yes"}
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
