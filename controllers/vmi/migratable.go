package vmi

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// Reasons of a LiveMigratable=False condition.
const (
	ReasonDisksNotLiveMigratable   = "DisksNotLiveMigratable"
	ReasonStateNotLiveMigratable   = "PersistentStateNotLiveMigratable"
	ReasonHostDevicesNotMigratable = "HostDeviceNotLiveMigratable"
	ReasonInterfaceNotMigratable   = "InterfaceNotLiveMigratable"
)

// setLiveMigratable sets the LiveMigratable condition from the spec: a live migration copies the
// guest's memory and its containerDisk and emptyDisk volumes to the target; anything tied to the
// source node or to a claim only it may mount keeps the instance where it is.
func setLiveMigratable(vmi *virtv1.VirtualMachineInstance) {
	c := metav1.Condition{Type: virtv1.VirtualMachineInstanceLiveMigratable, Status: metav1.ConditionTrue, Reason: "Migratable"}
	if reason, why := notMigratable(&vmi.Spec); reason != "" {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, reason, why
	}
	meta.SetStatusCondition(&vmi.Status.Conditions, c)
}

// notMigratable says why an instance of spec cannot be live-migrated ("" when it can).
func notMigratable(spec *virtv1.VirtualMachineInstanceSpec) (reason, why string) {
	for _, v := range spec.Volumes {
		kind := ""
		switch {
		case v.PersistentVolumeClaim != nil:
			kind = "persistentVolumeClaim"
		case v.DataVolume != nil:
			kind = "dataVolume"
		case v.HostDisk != nil:
			kind = "hostDisk"
		}
		if kind != "" {
			return ReasonDisksNotLiveMigratable, fmt.Sprintf("volume %q is a %s: only containerDisk, emptyDisk and generated (cloud-init, config) volumes move with the guest", v.Name, kind)
		}
	}
	if d := spec.Domain.Devices; d.TPM != nil && d.TPM.Persistent != nil && *d.TPM.Persistent {
		return ReasonStateNotLiveMigratable, "spec.domain.devices.tpm.persistent: the TPM's state is on a claim of the source"
	}
	if fw := spec.Domain.Firmware; fw != nil && fw.Bootloader != nil && fw.Bootloader.EFI != nil && fw.Bootloader.EFI.Persistent != nil && *fw.Bootloader.EFI.Persistent {
		return ReasonStateNotLiveMigratable, "spec.domain.firmware.bootloader.efi.persistent: the EFI variables are on a claim of the source"
	}
	if len(spec.Domain.Devices.HostDevices) > 0 || len(spec.Domain.Devices.GPUs) > 0 {
		return ReasonHostDevicesNotMigratable, "spec.domain.devices: host devices and GPUs stay on their node"
	}
	for _, n := range spec.Networks {
		if n.Multus != nil {
			return ReasonInterfaceNotMigratable, fmt.Sprintf("spec.networks[name=%s]: a Multus network's bridge is set up on the source only", n.Name)
		}
	}
	return "", ""
}
