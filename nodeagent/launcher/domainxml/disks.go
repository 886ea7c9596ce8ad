package domainxml

import (
	"fmt"
	"path/filepath"

	"libvirt.org/go/libvirtxml"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// Directories under PrivateDir for the files the launcher creates.
const (
	// OverlaysDir holds the qcow2 overlays on top of containerDisk images.
	OverlaysDir = "overlays"
	// EmptyDisksDir holds emptyDisk images.
	EmptyDisksDir = "emptydisks"
	// CloudInitDir holds the NoCloud seed ISOs.
	CloudInitDir = "cloudinit"
	// ConfigDisksDir holds the ISO images of configMap, secret, serviceAccount and downwardAPI volumes.
	ConfigDisksDir = "configdisks"
	// PVCImage is the disk image's name on a filesystem PVC (KubeVirt's convention).
	PVCImage = "disk.img"
)

// diskNames hands out target device names: vda, vdb… for virtio, sda, sdb… for the rest (sata, scsi
// and usb share the sd namespace in libvirt).
type diskNames struct{ vd, sd int }

func (n *diskNames) next(bus virtv1.DiskBus) string {
	if bus == virtv1.DiskBusVirtio {
		n.vd++
		return "vd" + driveLetters(n.vd)
	}
	n.sd++
	return "sd" + driveLetters(n.sd)
}

// driveLetters is a, b, … z, aa, ab … for 1, 2, … 26, 27, 28.
func driveLetters(i int) string {
	s := ""
	for i > 0 {
		i--
		s = string(rune('a'+i%26)) + s
		i /= 26
	}
	return s
}

// addDisks adds one <disk> per spec.domain.devices.disks entry and the files behind them.
func addDisks(plan *Plan, vmi *virtv1.VirtualMachineInstance, in Inputs) error {
	volumes := map[string]*virtv1.Volume{}
	for i := range vmi.Spec.Volumes {
		volumes[vmi.Spec.Volumes[i].Name] = &vmi.Spec.Volumes[i]
	}
	var names diskNames
	scsi := false
	for i := range vmi.Spec.Domain.Devices.Disks {
		d := &vmi.Spec.Domain.Devices.Disks[i]
		field := fmt.Sprintf("spec.domain.devices.disks[%d]", i)
		vol, ok := volumes[d.Name]
		if !ok {
			return fmt.Errorf("%s: no volume named %q in spec.volumes", field, d.Name)
		}
		disk, err := diskDevice(d, field)
		if err != nil {
			return err
		}
		if disk.Target.Bus == string(virtv1.DiskBusSCSI) {
			scsi = true
		}
		disk.Target.Dev = names.next(virtv1.DiskBus(disk.Target.Bus))
		if err := diskSource(plan, &disk, vol, in); err != nil {
			return err
		}
		plan.Domain.Devices.Disks = append(plan.Domain.Devices.Disks, disk)
	}
	if scsi {
		idx := uint(0)
		plan.Domain.Devices.Controllers = append(plan.Domain.Devices.Controllers,
			libvirtxml.DomainController{Type: "scsi", Index: &idx, Model: "virtio-scsi"})
	}
	return nil
}

// diskDevice is the guest side of a disk: device kind, bus, read-only, boot order, serial, cache, IO
// mode and error policy.
func diskDevice(d *virtv1.Disk, field string) (libvirtxml.DomainDisk, error) {
	disk := libvirtxml.DomainDisk{
		Device: "disk",
		Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Cache: d.Cache, IO: string(d.IO)},
		Target: &libvirtxml.DomainDiskTarget{Bus: string(virtv1.DiskBusVirtio)},
		Serial: d.Serial,
	}
	if d.ErrorPolicy != nil {
		disk.Driver.ErrorPolicy = string(*d.ErrorPolicy)
	}
	readOnly := false
	switch {
	case d.LUN != nil:
		return disk, fmt.Errorf("%s.lun: not supported (attach the volume as disk or cdrom)", field)
	case d.CDRom != nil:
		disk.Device = "cdrom"
		disk.Target.Bus = string(virtv1.DiskBusSATA)
		if d.CDRom.Bus != "" {
			disk.Target.Bus = string(d.CDRom.Bus)
		}
		if disk.Target.Bus == string(virtv1.DiskBusVirtio) {
			return disk, fmt.Errorf("%s.cdrom.bus: virtio cannot carry a cdrom (use sata or scsi)", field)
		}
		readOnly = d.CDRom.ReadOnly == nil || *d.CDRom.ReadOnly
		if d.CDRom.Tray == "open" {
			disk.Target.Tray = "open"
		}
	case d.Disk != nil:
		if d.Disk.Bus != "" {
			disk.Target.Bus = string(d.Disk.Bus)
		}
		readOnly = d.Disk.ReadOnly
		if d.Disk.PciAddress != "" {
			return disk, fmt.Errorf("%s.disk.pciAddress: not supported", field)
		}
	}
	switch virtv1.DiskBus(disk.Target.Bus) {
	case virtv1.DiskBusVirtio, virtv1.DiskBusSATA, virtv1.DiskBusSCSI, virtv1.DiskBusUSB:
	default:
		return disk, fmt.Errorf("%s: unknown bus %q (virtio, sata, scsi or usb)", field, disk.Target.Bus)
	}
	if readOnly {
		disk.ReadOnly = &libvirtxml.DomainDiskReadOnly{}
	}
	if d.BootOrder != nil {
		disk.Boot = &libvirtxml.DomainDeviceBoot{Order: *d.BootOrder}
	}
	return disk, nil
}

// diskSource is the host side of a disk: the file, its format and, for the files the launcher
// creates, an entry in plan.Files.
func diskSource(plan *Plan, disk *libvirtxml.DomainDisk, vol *virtv1.Volume, in Inputs) error {
	field := fmt.Sprintf("spec.volumes[name=%s]", vol.Name)
	var path, format string
	switch {
	case vol.ContainerDisk != nil:
		img, ok := in.ContainerDisks[vol.Name]
		if !ok {
			return fmt.Errorf("%s.containerDisk: no image was copied out of %s", field, vol.ContainerDisk.Image)
		}
		path, format = filepath.Join(in.PrivateDir, OverlaysDir, vol.Name+".qcow2"), "qcow2"
		plan.Files = append(plan.Files, File{
			Kind: FileOverlay, Path: path, Volume: vol.Name, Backing: img.Path, BackingFormat: img.Format,
		})
		disk.BackingStore = &libvirtxml.DomainDiskBackingStore{
			Format: &libvirtxml.DomainDiskFormat{Type: img.Format},
			Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: img.Path}},
		}
	case vol.PersistentVolumeClaim != nil || vol.DataVolume != nil:
		path, format = filepath.Join(in.PVCRoot, vol.Name, PVCImage), "raw"
		plan.Files = append(plan.Files, File{Kind: FilePVCImage, Path: path, Volume: vol.Name})
		if _, readOnly, _ := vol.Claim(); readOnly {
			disk.ReadOnly = &libvirtxml.DomainDiskReadOnly{}
		}
	case vol.HostDisk != nil:
		path, format = filepath.Join(in.HostDiskRoot, vol.Name, filepath.Base(filepath.Clean(vol.HostDisk.Path))), "raw"
		plan.Files = append(plan.Files, File{Kind: FileHostDisk, Path: path, Volume: vol.Name})
	case configDisk(vol) != "":
		path, format = filepath.Join(in.PrivateDir, ConfigDisksDir, vol.Name+".iso"), "raw"
		plan.Files = append(plan.Files, File{Kind: FileConfigISO, Path: path, Volume: vol.Name,
			Source: filepath.Join(in.ConfigDiskRoot, vol.Name), Label: configDisk(vol)})
		disk.ReadOnly = &libvirtxml.DomainDiskReadOnly{}
	case vol.EmptyDisk != nil:
		size := vol.EmptyDisk.Capacity.Value()
		if size <= 0 {
			return fmt.Errorf("%s.emptyDisk.capacity: must be positive", field)
		}
		path, format = filepath.Join(in.PrivateDir, EmptyDisksDir, vol.Name+".img"), "raw"
		plan.Files = append(plan.Files, File{Kind: FileSparse, Path: path, Volume: vol.Name, Size: size})
	case vol.CloudInitNoCloud != nil:
		path, format = filepath.Join(in.PrivateDir, CloudInitDir, vol.Name+".iso"), "raw"
		plan.Files = append(plan.Files, File{Kind: FileNoCloud, Path: path, Volume: vol.Name})
		disk.ReadOnly = &libvirtxml.DomainDiskReadOnly{}
	case vol.CloudInitConfigDrive != nil:
		path, format = filepath.Join(in.PrivateDir, CloudInitDir, vol.Name+".iso"), "raw"
		plan.Files = append(plan.Files, File{Kind: FileConfigDrive, Path: path, Volume: vol.Name})
		disk.ReadOnly = &libvirtxml.DomainDiskReadOnly{}
	default:
		return fmt.Errorf("%s: no volume source set (containerDisk, persistentVolumeClaim, dataVolume, hostDisk, emptyDisk, cloudInitNoCloud, configMap, secret, serviceAccount or downwardAPI)", field)
	}
	disk.Driver.Type = format
	disk.Source = &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: path}}
	return nil
}

// configDisk is the ISO label of a configMap, secret, serviceAccount or downwardAPI volume (its
// volumeLabel, else KubeVirt's "cfgdata"); "" for other volumes.
func configDisk(vol *virtv1.Volume) string {
	label := ""
	switch {
	case vol.ConfigMap != nil:
		label = vol.ConfigMap.VolumeLabel
	case vol.Secret != nil:
		label = vol.Secret.VolumeLabel
	case vol.DownwardAPI != nil:
		label = vol.DownwardAPI.VolumeLabel
	case vol.ServiceAccount == nil:
		return ""
	}
	if label == "" {
		label = "cfgdata"
	}
	return label
}
