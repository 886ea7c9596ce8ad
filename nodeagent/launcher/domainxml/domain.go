package domainxml

import (
	"encoding/xml"
	"errors"
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"libvirt.org/go/libvirtxml"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// TBCacheMiB is the TCG translation-block cache given to emulated guests: qemu's default (1 GiB on
// x86_64 hosts, allocated lazily but touched quickly) costs ~30 MiB more RSS for no gain on small guests.
const TBCacheMiB = 32

// libvirt's domain types: hardware virtualization, software emulation (TCG).
const (
	domainTypeKVM      = "kvm"
	domainTypeEmulated = "qemu"
)

// MetadataNamespace is the XML namespace of the launcher's <metadata> element in the domain.
const MetadataNamespace = "https://podvirt.io/launcher/v1"

// Inputs is everything Build needs besides the VMI: where files live and what the launcher found there.
type Inputs struct {
	// Emulation selects software emulation (TCG, <domain type='qemu'>) instead of KVM.
	Emulation bool
	// PrivateDir is launcherv1.PrivateDir in a Pod; tests point it elsewhere.
	PrivateDir string
	// PVCRoot is launcherv1.PVCMountRoot in a Pod.
	PVCRoot string
	// HostDiskRoot is launcherv1.HostDiskMountRoot in a Pod.
	HostDiskRoot string
	// ConfigDiskRoot is launcherv1.ConfigDiskMountRoot in a Pod.
	ConfigDiskRoot string
	// StateDir is launcherv1.PersistentStateDir in a Pod (persistent EFI variables live there).
	StateDir string
	// ContainerDisks maps a containerDisk volume's name to the image its disk container copied.
	ContainerDisks map[string]Image
	// Kernel and Initrd are the kernelBoot files copied into PrivateDir/kernelboot (Initrd may be empty).
	Kernel, Initrd string
}

// Image is a disk image file and its format ("qcow2" or "raw").
type Image struct {
	Path   string
	Format string
}

// FileKind says how the launcher creates a file before it starts the guest.
type FileKind string

// File kinds.
const (
	// FileOverlay is a qcow2 overlay on top of Backing (read-only); recreated on every start.
	FileOverlay FileKind = "overlay"
	// FileSparse is a sparse raw file of Size bytes; recreated on every start (emptyDisk).
	FileSparse FileKind = "sparse"
	// FilePVCImage is a raw image on a PVC: kept when it exists, else created sparse with the size of
	// the filesystem it lives on (KubeVirt's filesystem-PVC convention).
	FilePVCImage FileKind = "pvc-image"
	// FileHostDisk is a hostDisk image the node agent created or checked before the sync; the
	// launcher only checks it is there.
	FileHostDisk FileKind = "host-disk"
	// FileConfigDrive is a cloud-init ConfigDrive ISO made from the volume's data.
	FileConfigDrive FileKind = "configdrive"
	// FileConfigISO is an ISO image of a mounted ConfigMap, Secret, ServiceAccount or downward API
	// volume (the files of Source, labelled Label).
	FileConfigISO FileKind = "config-iso"
	// FileNoCloud is a cloud-init NoCloud seed ISO built from the volume named Volume.
	FileNoCloud FileKind = "nocloud"
)

// File is a file the launcher must create before it starts the guest.
type File struct {
	Kind FileKind
	Path string
	// Volume is the spec.volumes entry the file belongs to.
	Volume string
	// Backing and BackingFormat are set for FileOverlay.
	Backing       string
	BackingFormat string
	// Size is set for FileSparse.
	Size int64
	// Source (a mounted volume's directory) and Label are set for FileConfigISO.
	Source, Label string
}

// PortForward is a guest port reachable at the Pod's address (user-mode networking's host forward).
type PortForward struct {
	// Interface is the spec.domain.devices.interfaces name.
	Interface string `xml:"interface,attr"`
	// Protocol is "tcp" or "udp".
	Protocol string `xml:"protocol,attr"`
	Port     int32  `xml:"port,attr"`
}

// Plan is what Build returns: the domain and what the launcher must do around it.
type Plan struct {
	Domain *libvirtxml.Domain
	// Files to create before the domain starts, in spec order.
	Files []File
	// Ports to forward once qemu runs.
	Ports []PortForward
	// InterfaceNames are the spec names of Domain.Devices.Interfaces, in the same order.
	InterfaceNames []string
	// PodInterface is the spec name of the first interface on the pod network (user-mode), which
	// port forwards and probes reach; "" when the guest has none.
	PodInterface string
	// MemoryBytes is the guest memory the spec asked for (libvirt keeps it in KiB, qemu rounds it up
	// to whole MiB: the launcher reports what qemu got).
	MemoryBytes int64
}

// metadata is the launcher's <metadata> child: who the domain belongs to and what it forwards.
type metadata struct {
	XMLName   xml.Name      `xml:"https://podvirt.io/launcher/v1 vmi"`
	Namespace string        `xml:"namespace,attr"`
	Name      string        `xml:"name,attr"`
	UID       string        `xml:"uid,attr"`
	Ports     []PortForward `xml:"port"`
}

// DomainName is the libvirt domain name of a VMI.
func DomainName(vmi *virtv1.VirtualMachineInstance) string {
	return vmi.Namespace + "_" + vmi.Name
}

// Build converts vmi into a libvirt domain and the files and port forwards around it.
func Build(vmi *virtv1.VirtualMachineInstance, in Inputs) (*Plan, error) {
	if in.PrivateDir == "" {
		in.PrivateDir = launcherv1.PrivateDir
	}
	if in.PVCRoot == "" {
		in.PVCRoot = launcherv1.PVCMountRoot
	}
	if in.HostDiskRoot == "" {
		in.HostDiskRoot = launcherv1.HostDiskMountRoot
	}
	if in.ConfigDiskRoot == "" {
		in.ConfigDiskRoot = launcherv1.ConfigDiskMountRoot
	}
	if errs := vmi.Spec.NameErrors(field.NewPath("spec")); len(errs) > 0 { // names become paths and devices
		return nil, errs.ToAggregate()
	}
	spec := &vmi.Spec.Domain
	if len(spec.Devices.GPUs) > 0 {
		return nil, errors.New("spec.domain.devices.gpus: the launcher cannot pass a GPU through to the guest yet")
	}
	if len(spec.Devices.HostDevices) > 0 {
		return nil, errors.New("spec.domain.devices.hostDevices: the launcher cannot pass a host device through to the guest yet")
	}
	guest, err := spec.GuestMemory()
	if err != nil {
		return nil, err
	}
	mem := guest.Value()
	dom := &libvirtxml.Domain{
		Type:       domainTypeKVM,
		Name:       DomainName(vmi),
		Memory:     &libvirtxml.DomainMemory{Value: uint(mem), Unit: "b"},
		OnPoweroff: "destroy",
		OnReboot:   "restart",
		OnCrash:    "destroy",
		Devices:    &libvirtxml.DomainDeviceList{},
	}
	if in.Emulation {
		dom.Type = domainTypeEmulated
	}
	hugepages, err := spec.HugepageSize()
	if err != nil {
		return nil, err
	}
	if hugepages > 0 { // from the hugetlbfs the Pod mounts, which the launcher names in qemu.conf
		dom.MemoryBacking = &libvirtxml.DomainMemoryBacking{MemoryHugePages: &libvirtxml.DomainMemoryHugepages{
			Hugepages: []libvirtxml.DomainMemoryHugepage{{Size: uint(hugepages >> 10), Unit: "KiB"}},
		}}
	}
	if p := spec.RebootPolicy; p != nil && *p == virtv1.RebootPolicyTerminate {
		dom.OnReboot = "destroy"
	}
	if err := setFirmware(dom, vmi); err != nil {
		return nil, err
	}
	setCPU(dom, spec, in.Emulation)
	if err := setFeatures(dom, spec, in.Emulation); err != nil {
		return nil, err
	}
	if err := setOS(dom, spec, in); err != nil {
		return nil, err
	}
	plan := &Plan{Domain: dom, MemoryBytes: mem}
	if err := addDisks(plan, vmi, in); err != nil {
		return nil, err
	}
	if err := addInterfaces(plan, vmi); err != nil {
		return nil, err
	}
	addConsoleAndGraphics(dom, &spec.Devices, in.PrivateDir)
	addDevices(dom, &spec.Devices, in.PrivateDir)
	setClock(dom, spec.Clock)
	md, err := xml.Marshal(metadata{
		Namespace: vmi.Namespace, Name: vmi.Name, UID: string(vmi.UID), Ports: plan.Ports,
	})
	if err != nil {
		return nil, fmt.Errorf("marshal domain metadata: %w", err)
	}
	dom.Metadata = &libvirtxml.DomainMetadata{XML: string(md)}
	return plan, nil
}

// setFirmware sets the domain UUID and the SMBIOS system entries the guest reads. The UUID is
// spec.domain.firmware.uuid (a VirtualMachine's controller derives a stable one); a bare instance
// without one gets its own metadata.uid.
func setFirmware(dom *libvirtxml.Domain, vmi *virtv1.VirtualMachineInstance) error {
	fw := vmi.Spec.Domain.Firmware
	if fw == nil {
		fw = &virtv1.Firmware{}
	}
	id := string(fw.UUID)
	if id == "" {
		id = string(vmi.UID)
	}
	if id == "" {
		return errors.New("spec.domain.firmware.uuid: required when the instance has no metadata.uid")
	}
	dom.UUID = id
	entries := []libvirtxml.DomainSysInfoEntry{
		{Name: "manufacturer", Value: "Podvirt"},
		{Name: "product", Value: "None"},
		{Name: "uuid", Value: id},
		{Name: "family", Value: "Podvirt"},
	}
	if fw.Serial != "" {
		entries = append(entries, libvirtxml.DomainSysInfoEntry{Name: "serial", Value: fw.Serial})
	}
	dom.SysInfo = []libvirtxml.DomainSysInfo{{SMBIOS: &libvirtxml.DomainSysInfoSMBIOS{
		System:  &libvirtxml.DomainSysInfoSystem{Entry: entries},
		Chassis: chassis(vmi.Spec.Domain.Chassis),
	}}}
	return nil
}

// emulatedCPUModel is qemu's default x86-64 CPU model under emulation (TCG); named where CPU
// features need a model to apply to.
const emulatedCPUModel = "qemu64"

// setCPU sets vCPUs, topology, the model and its features. Under emulation host-model/host-passthrough
// mean nothing (there is no host CPU to copy), so the emulator's default model is used.
func setCPU(dom *libvirtxml.Domain, spec *virtv1.DomainSpec, emulation bool) {
	sockets, cores, threads := spec.CPUTopology()
	model := ""
	var features []virtv1.CPUFeature
	if spec.CPU != nil {
		model, features = spec.CPU.Model, spec.CPU.Features
	}
	dom.VCPU = &libvirtxml.DomainVCPU{Placement: "static", Value: uint(spec.VCPUs())}
	cpu := &libvirtxml.DomainCPU{
		Topology: &libvirtxml.DomainCPUTopology{Sockets: sockets, Dies: 1, Cores: cores, Threads: threads},
	}
	switch {
	case model == "host-model" || model == "host-passthrough":
		if !emulation {
			cpu.Mode = model
		}
	case model != "":
		cpu.Mode = "custom"
		cpu.Match = "exact"
		cpu.Model = &libvirtxml.DomainCPUModel{Value: model, Fallback: "forbid"}
	case !emulation:
		cpu.Mode = "host-model"
	}
	if len(features) > 0 && cpu.Mode == "" && cpu.Model == nil {
		// Features change a model: the emulator's default one, named.
		cpu.Mode, cpu.Match = "custom", "exact"
		cpu.Model = &libvirtxml.DomainCPUModel{Value: emulatedCPUModel, Fallback: "forbid"}
	}
	for _, f := range features {
		policy := f.Policy
		if policy == "" {
			policy = virtv1.DefaultCPUFeaturePolicy
		}
		cpu.Features = append(cpu.Features, libvirtxml.DomainCPUFeature{Policy: policy, Name: f.Name})
	}
	dom.CPU = cpu
}

// EmulatorDefaultCPU reports whether dom runs under software emulation with the emulator's default
// CPU and asks nothing of the started vCPU's features: no CPU model or features, no Hyper-V
// enlightenments (libvirt verifies them), and, to be safe, no KVM features or PV spinlocks. libvirt
// then has nothing to check against those features, so it may read them the short way
// (qemucaps.ForDefaultCPU).
func EmulatorDefaultCPU(dom *libvirtxml.Domain) bool {
	if dom.Type != domainTypeEmulated {
		return false
	}
	if c := dom.CPU; c != nil && ((c.Mode != "" && c.Mode != "custom") || c.Model != nil || len(c.Features) > 0) {
		return false
	}
	f := dom.Features
	return f == nil || (f.HyperV == nil && f.KVM == nil && f.PVSpinlock == nil)
}

// setOS sets the machine type, SMBIOS from sysinfo, the firmware and direct kernel boot.
func setOS(dom *libvirtxml.Domain, spec *virtv1.DomainSpec, in Inputs) error {
	machine := spec.MachineType()
	dom.OS = &libvirtxml.DomainOS{
		Type:   &libvirtxml.DomainOSType{Arch: "x86_64", Machine: machine, Type: "hvm"},
		SMBios: &libvirtxml.DomainSMBios{Mode: "sysinfo"},
	}
	fw := spec.Firmware
	if fw != nil && fw.Bootloader != nil {
		setBootloader(dom, fw.Bootloader)
	}
	if spec.EFIPersistent() && in.StateDir == "" {
		return errors.New("spec.domain.firmware.bootloader.efi.persistent: no persistent state directory")
	}
	if spec.EFIPersistent() { // libvirt copies OVMF's variable template there when there is none yet
		dom.OS.NVRam = &libvirtxml.DomainNVRam{NVRam: filepath.Join(in.StateDir, launcherv1.EFIVarsFile)}
	}
	if fw == nil || fw.KernelBoot == nil {
		return nil
	}
	kb := fw.KernelBoot
	if kb.Container == nil {
		return errors.New("spec.domain.firmware.kernelBoot.container: required (the only kernel source supported)")
	}
	if kb.Container.KernelPath == "" {
		return errors.New("spec.domain.firmware.kernelBoot.container.kernelPath: required to boot a kernel")
	}
	if in.Kernel == "" {
		return fmt.Errorf("spec.domain.firmware.kernelBoot.container.kernelPath: %s was not copied into %s",
			kb.Container.KernelPath, filepath.Join(in.PrivateDir, launcherv1.KernelBootDir))
	}
	if kb.Container.InitrdPath != "" && in.Initrd == "" {
		return fmt.Errorf("spec.domain.firmware.kernelBoot.container.initrdPath: %s was not copied into %s",
			kb.Container.InitrdPath, filepath.Join(in.PrivateDir, launcherv1.KernelBootDir))
	}
	dom.OS.Kernel = in.Kernel
	dom.OS.Initrd = in.Initrd
	dom.OS.Cmdline = kb.KernelArgs
	return nil
}

// setFeatures sets ACPI (default on: graceful shutdown needs it), APIC (default on), SMM (on for
// Secure Boot), the Hyper-V enlightenments, KVM signature and paravirtual spinlocks, and, under
// emulation, the TCG translation-block cache size.
func setFeatures(dom *libvirtxml.Domain, spec *virtv1.DomainSpec, emulation bool) error {
	f := spec.Features
	fl := &libvirtxml.DomainFeatureList{}
	acpi, apic := true, true
	if f != nil {
		acpi = enabled(&f.ACPI, true)
		if f.APIC != nil {
			apic = enabled(&f.APIC.FeatureState, true)
		}
		if f.SMM != nil {
			state := "off"
			if enabled(f.SMM, true) {
				state = "on"
			}
			fl.SMM = &libvirtxml.DomainFeatureSMM{State: state}
		}
	}
	if fw := spec.Firmware; fw != nil && fw.Bootloader != nil && fw.Bootloader.EFI != nil && fw.Bootloader.EFI.SecureBootEnabled() {
		fl.SMM = &libvirtxml.DomainFeatureSMM{State: "on"} // Secure Boot's firmware needs it
	}
	if acpi {
		fl.ACPI = &libvirtxml.DomainFeature{}
	}
	if apic {
		fl.APIC = &libvirtxml.DomainFeatureAPIC{}
	}
	if emulation {
		fl.TCG = &libvirtxml.DomainFeatureTCG{TBCache: &libvirtxml.DomainFeatureTCGTBCache{Unit: "MiB", Size: TBCacheMiB}}
	}
	dom.Features = fl
	hypervClock, err := setHyperV(fl, f, emulation)
	if hypervClock {
		dom.Clock = &libvirtxml.DomainClock{Offset: "utc", Timer: []libvirtxml.DomainTimer{{Name: "hypervclock", Present: "yes"}}}
	}
	return err
}

func enabled(s *virtv1.FeatureState, def bool) bool {
	if s == nil || s.Enabled == nil {
		return def
	}
	return *s.Enabled
}

// addConsoleAndGraphics adds the serial console (unix socket + log file) and the VNC display (unix
// socket) unless the spec turns them off.
func addConsoleAndGraphics(dom *libvirtxml.Domain, d *virtv1.Devices, privateDir string) {
	devs := dom.Devices
	if d.AutoattachSerialConsole == nil || *d.AutoattachSerialConsole {
		port := uint(0)
		src := &libvirtxml.DomainChardevSource{UNIX: &libvirtxml.DomainChardevSourceUNIX{
			Mode: "bind", Path: filepath.Join(privateDir, launcherv1.SerialSocket),
		}}
		devs.Serials = []libvirtxml.DomainSerial{{
			Source: src,
			Target: &libvirtxml.DomainSerialTarget{Port: &port},
			Log:    &libvirtxml.DomainChardevLog{File: filepath.Join(privateDir, launcherv1.SerialLog), Append: "on"},
		}}
		devs.Consoles = []libvirtxml.DomainConsole{{
			Source: src,
			Target: &libvirtxml.DomainConsoleTarget{Type: "serial", Port: &port},
		}}
	}
	if d.AutoattachGraphicsDevice == nil || *d.AutoattachGraphicsDevice {
		devs.Graphics = []libvirtxml.DomainGraphic{{VNC: &libvirtxml.DomainGraphicVNC{
			Listeners: []libvirtxml.DomainGraphicListener{{Socket: &libvirtxml.DomainGraphicListenerSocket{
				Socket: filepath.Join(privateDir, launcherv1.VNCSocket),
			}}},
		}}}
		devs.Videos = []libvirtxml.DomainVideo{{Model: libvirtxml.DomainVideoModel{Type: "vga", VRam: 16384, Heads: 1}}}
	} else {
		devs.Videos = []libvirtxml.DomainVideo{{Model: libvirtxml.DomainVideoModel{Type: "none"}}}
	}
}
