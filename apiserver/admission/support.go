package admission

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Support is what Podvirt does with a family of kubevirt.io/v1 fields.
type Support string

// The three answers Podvirt gives to a KubeVirt field.
const (
	// Implemented: the field does what it does in KubeVirt.
	Implemented Support = "implemented"
	// Explained: the object is stored; the VM says why it cannot start (condition, Event).
	Explained Support = "accepted, explained"
	// Refused: admission refuses the object, naming the field, with NotSupported.
	Refused Support = "refused"
)

// NotSupported is the message admission gives for a refused field.
const NotSupported = "not supported by Podvirt"

// Family is a field path and what Podvirt does with it. The path is relative to the spec it belongs
// to; "[]" after a name means every item of that list. A family covers every field below its path
// unless a longer family says otherwise. With Values, only those values of the field are refused
// (as fmt prints them: "true" for a bool).
type Family struct {
	Path    string
	Support Support
	Values  []string
	Note    string
}

// InstanceFamilies covers every field of a VirtualMachineInstance's spec (and so of a VM's or replica
// set's template). The test proves every field of api/v1 falls under one; docs/api.md is generated
// from it.
var InstanceFamilies = []Family{
	{Path: "domain.resources", Support: Implemented, Note: "guest memory, CPU requests/limits of the launcher Pod"},
	{Path: "domain.cpu", Support: Implemented, Note: "sockets, cores, threads; model (the emulator's default under TCG)"},
	{Path: "domain.cpu.dedicatedCpuPlacement", Support: Refused, Note: "needs the kubelet's static CPU manager"},
	{Path: "domain.cpu.isolateEmulatorThread", Support: Refused, Note: "needs dedicatedCpuPlacement"},
	{Path: "domain.cpu.numa", Support: Refused, Note: "needs dedicatedCpuPlacement and hugepages"},
	{Path: "domain.cpu.realtime", Support: Refused, Note: "needs dedicatedCpuPlacement"},
	{Path: "domain.cpu.maxSockets", Support: Refused, Note: "CPU hotplug"},
	{Path: "domain.cpu.features", Support: Implemented, Note: "libvirt's policies, on the model (under TCG qemu64, the emulator's default)"},
	{Path: "domain.memory.guest", Support: Implemented},
	{Path: "domain.memory.maxGuest", Support: Refused, Note: "memory hotplug"},
	{Path: "domain.memory.hugepages", Support: Implemented, Note: "2Mi or 1Gi pages: the launcher Pod requests hugepages-<size> (Unschedulable on nodes without them)"},
	{Path: "domain.machine", Support: Implemented, Note: "defaults to q35"},
	{Path: "domain.firmware.uuid", Support: Implemented, Note: "derived from the VM when empty, stable across restarts"},
	{Path: "domain.firmware.serial", Support: Implemented},
	{Path: "domain.firmware.kernelBoot", Support: Implemented, Note: "kernel and initrd from a container image"},
	{Path: "domain.firmware.bootloader.bios", Support: Implemented, Note: "SeaBIOS, the default; useSerial shows its output on the serial console"},
	{Path: "domain.firmware.bootloader.efi", Support: Implemented, Note: "OVMF from Debian; secureBoot (default true) uses the build with Microsoft's keys enrolled and turns SMM on"},
	{Path: "domain.firmware.bootloader.efi.persistent", Support: Implemented, Note: "the variables on a claim the VM owns (persistent-state-for-NAME, default StorageClass)"},
	{Path: "domain.firmware.acpi", Support: Refused, Note: "ACPI tables from Secrets"},
	{Path: "domain.clock", Support: Implemented, Note: "utc with offsetSeconds, timezone; hpet, pit, rtc and hyperv timers"},
	{Path: "domain.clock.timer.kvm", Support: Refused, Note: "kvmclock is untested here (no usable KVM)"},
	{Path: "domain.features.acpi", Support: Implemented},
	{Path: "domain.features.apic", Support: Implemented},
	{Path: "domain.features.apic.endOfInterrupt", Support: Refused, Note: "a KVM paravirtual feature"},
	{Path: "domain.features.smm", Support: Implemented},
	{Path: "domain.features.hyperv", Support: Implemented, Note: "dependencies checked (synic, tlbflush, ipi need vpindex; synictimer needs synic and gets the hypervclock timer); under emulation (no KVM) vpindex, synic, synictimer, tlbflush, ipi, evmcs and reenlightenment fail the instance naming the field, and whether a guest sees the others under TCG is not verified"},
	{Path: "domain.features.hyperv.tlbflush.direct", Support: Refused},
	{Path: "domain.features.hyperv.tlbflush.extended", Support: Refused},
	{Path: "domain.features.hypervPassthrough", Support: Implemented, Note: "KVM only: under emulation the instance fails naming the field"},
	{Path: "domain.features.kvm", Support: Implemented, Note: "hidden hides the KVM signature"},
	{Path: "domain.features.pvspinlock", Support: Implemented},
	{Path: "domain.chassis", Support: Implemented, Note: "SMBIOS chassis table"},
	{Path: "domain.ioThreadsPolicy", Support: Refused},
	{Path: "domain.ioThreads", Support: Refused},
	{Path: "domain.rebootPolicy", Support: Implemented, Note: "Reboot (default) or Terminate: a guest reboot ends the instance"},
	{Path: "domain.launchSecurity", Support: Refused, Note: "needs AMD SEV hardware"},

	{Path: "domain.devices.disks[]", Support: Implemented, Note: "disk (virtio, sata, scsi, usb), cdrom (sata, scsi); bootOrder, serial, cache, readonly, io threads, errorPolicy"},
	{Path: "domain.devices.disks[].lun", Support: Refused, Note: "attach the volume as disk or cdrom"},
	{Path: "domain.devices.disks[].disk.pciAddress", Support: Refused},
	{Path: "domain.devices.disks[].io", Support: Refused, Values: []string{"native"}, Note: "needs O_DIRECT storage; use threads"},
	{Path: "domain.devices.disks[].changedBlockTracking", Support: Refused, Note: "incremental backups"},
	{Path: "domain.devices.disks[].dedicatedIOThread", Support: Refused},
	{Path: "domain.devices.disks[].blockSize", Support: Refused},
	{Path: "domain.devices.disks[].shareable", Support: Refused, Note: "needs shared storage"},
	{Path: "domain.devices.disks[].tag", Support: Refused, Note: "device role tagging"},
	{Path: "domain.devices.interfaces[]", Support: Implemented, Note: "masquerade binding (user-mode networking); model, macAddress, ports, bootOrder"},
	{Path: "domain.devices.interfaces[].pciAddress", Support: Refused},
	{Path: "domain.devices.interfaces[].macvtap", Support: Refused, Note: "use masquerade"},
	{Path: "domain.devices.interfaces[].passtBinding", Support: Refused, Note: "use masquerade"},
	{Path: "domain.devices.interfaces[].bridge", Support: Implemented, Note: "on Multus networks, and required there: the node agent bridges Multus' Pod interface to the guest's tap device (the Pod network is user-mode here; use masquerade there)"},
	{Path: "domain.devices.interfaces[].slirp", Support: Refused, Note: "use masquerade"},
	{Path: "domain.devices.interfaces[].sriov", Support: Refused, Note: "needs SR-IOV hardware and Multus"},
	{Path: "domain.devices.interfaces[].passt", Support: Refused, Note: "use masquerade"},
	{Path: "domain.devices.interfaces[].binding", Support: Refused, Note: "network binding plugins"},
	{Path: "domain.devices.interfaces[].dhcpOptions", Support: Refused},
	{Path: "domain.devices.interfaces[].tag", Support: Refused, Note: "device role tagging"},
	{Path: "domain.devices.interfaces[].acpiIndex", Support: Refused},
	{Path: "domain.devices.interfaces[].state", Support: Refused, Note: "link state changes"},
	{Path: "domain.devices.autoattachPodInterface", Support: Implemented},
	{Path: "domain.devices.autoattachGraphicsDevice", Support: Implemented},
	{Path: "domain.devices.autoattachSerialConsole", Support: Implemented},
	{Path: "domain.devices.autoattachMemBalloon", Support: Implemented, Note: "virtio balloon; none unless asked"},
	{Path: "domain.devices.autoattachInputDevice", Support: Implemented, Note: "a USB tablet when no inputs are listed"},
	{Path: "domain.devices.autoattachVSOCK", Support: Refused, Values: []string{"true"}, Note: "needs vhost-vsock on the node"},
	{Path: "domain.devices.disableHotplug", Support: Implemented, Note: "Podvirt does not hotplug"},
	{Path: "domain.devices.useVirtioTransitional", Support: Refused, Values: []string{"true"}},
	{Path: "domain.devices.blockMultiQueue", Support: Refused, Values: []string{"true"}},
	{Path: "domain.devices.networkInterfaceMultiqueue", Support: Refused, Values: []string{"true"}, Note: "not with user-mode networking"},
	{Path: "domain.devices.logSerialConsole", Support: Implemented, Note: "false drops the launcher Pod's guest-console-log container (virtctl logs)"},
	{Path: "domain.devices.inputs[]", Support: Implemented, Note: "tablet or keyboard on usb or virtio"},
	{Path: "domain.devices.watchdog.name", Support: Implemented},
	{Path: "domain.devices.watchdog.i6300esb", Support: Implemented, Note: "poweroff, reset or shutdown"},
	{Path: "domain.devices.watchdog.diag288", Support: Refused, Note: "s390x only"},
	{Path: "domain.devices.rng", Support: Implemented, Note: "virtio-rng fed from the host's /dev/urandom"},
	{Path: "domain.devices.tpm", Support: Implemented, Note: "TPM 2.0 (tpm-tis) emulated by swtpm beside qemu; persistent: its state on a claim the VM owns (persistent-state-for-NAME, default StorageClass; a standalone instance owns its own)"},
	{Path: "domain.devices.gpus[]", Support: Explained, Note: "the launcher Pod requests deviceName: Unschedulable, naming it, where no device plugin offers it; where one does, the VM fails naming the field (no passthrough yet)"},
	{Path: "domain.devices.gpus[].claimName", Support: Refused, Note: "dynamic resource allocation"},
	{Path: "domain.devices.gpus[].requestName", Support: Refused, Note: "dynamic resource allocation"},
	{Path: "domain.devices.hostDevices[]", Support: Explained, Note: "as gpus"},
	{Path: "domain.devices.hostDevices[].claimName", Support: Refused, Note: "dynamic resource allocation"},
	{Path: "domain.devices.hostDevices[].requestName", Support: Refused, Note: "dynamic resource allocation"},
	{Path: "domain.devices.filesystems", Support: Refused, Note: "virtiofs"},
	{Path: "domain.devices.sound", Support: Refused},
	{Path: "domain.devices.video", Support: Refused},
	{Path: "domain.devices.panicDevices", Support: Refused},
	{Path: "domain.devices.clientPassthrough", Support: Refused, Note: "USB redirection"},
	{Path: "domain.devices.downwardMetrics", Support: Refused},

	{Path: "volumes[].name", Support: Implemented},
	{Path: "volumes[].containerDisk", Support: Implemented, Note: "copied beside the launcher; the guest writes to an overlay, the image is never modified"},
	{Path: "volumes[].persistentVolumeClaim", Support: Implemented, Note: "a disk.img file on a Filesystem claim"},
	{Path: "volumes[].persistentVolumeClaim.hotpluggable", Support: Refused, Values: []string{"true"}, Note: "no hotplug"},
	{Path: "volumes[].cloudInitNoCloud", Support: Implemented},
	{Path: "volumes[].emptyDisk", Support: Implemented, Note: "capacity at most virt-api --max-disk-capacity (default 1Ti)"},
	{Path: "volumes[].ephemeral", Support: Refused},
	{Path: "volumes[].dataVolume", Support: Implemented, Note: "the claim CDI provisions for the DataVolume (named after it); without CDI the VM waits, saying CDI is not installed, until the claim exists"},
	{Path: "volumes[].dataVolume.hotpluggable", Support: Refused, Values: []string{"true"}, Note: "no hotplug"},
	{Path: "volumes[].cloudInitConfigDrive", Support: Implemented, Note: "an OpenStack config drive (label config-2): openstack/latest/user_data, meta_data.json, network_data.json"},
	{Path: "volumes[].sysprep", Support: Refused, Note: "Windows guests"},
	{Path: "volumes[].hostDisk", Support: Implemented, Note: "behind KubeVirt's HostDisk feature gate (off unless virt-api --feature-gates=HostDisk); images under /var/lib/podvirt/hostdisks/<namespace>/ on the node (other paths refused); DiskOrCreate makes a sparse image of its capacity (at most --max-disk-capacity), Disk must exist; the data stays on that node"},
	{Path: "volumes[].hostDisk.shared", Support: Refused, Values: []string{"true"}, Note: "no shared host storage"},
	{Path: "volumes[].configMap", Support: Implemented, Note: "an ISO disk of its keys (label volumeLabel, default cfgdata)"},
	{Path: "volumes[].secret", Support: Implemented, Note: "an ISO disk of its keys (label volumeLabel, default cfgdata)"},
	{Path: "volumes[].serviceAccount", Support: Implemented, Note: "an ISO disk (label cfgdata) of token, ca.crt and namespace; the launcher Pod runs as the ServiceAccount; one per instance"},
	{Path: "volumes[].downwardAPI", Support: Implemented, Note: "an ISO disk of the fields (label volumeLabel, default cfgdata)"},
	{Path: "volumes[].downwardMetrics", Support: Refused},
	{Path: "volumes[].memoryDump", Support: Refused, Note: "memory dumps"},
	{Path: "volumes[].containerPath", Support: Refused},
	{Path: "networks[].name", Support: Implemented},
	{Path: "networks[].pod", Support: Implemented},
	{Path: "networks[].multus", Support: Implemented, Note: "bridge binding: Multus attaches the NetworkAttachmentDefinition to the launcher Pod, the guest's NIC is on it at layer 2 (an address Multus' IPAM gives the Pod interface is not handed to the guest: use a network without IPAM and address the guest yourself); without Multus the instance gets no Pod and says MultusNotInstalled; a NAMESPACE/NAME of another namespace only with virt-api --allow-cross-namespace-networks; not live-migratable"},
	{Path: "networks[].multus.default", Support: Refused, Values: []string{"true"}, Note: "the Pod network is the cluster's"},
	{Path: "networks[].resourceClaim", Support: Refused, Note: "dynamic resource allocation"},

	{Path: "nodeSelector", Support: Implemented, Note: "copied to the launcher Pod"},
	{Path: "affinity", Support: Implemented, Note: "copied to the launcher Pod"},
	{Path: "tolerations", Support: Implemented, Note: "copied to the launcher Pod"},
	{Path: "topologySpreadConstraints", Support: Implemented, Note: "copied to the launcher Pod"},
	{Path: "schedulerName", Support: Implemented, Note: "copied to the launcher Pod"},
	{Path: "priorityClassName", Support: Implemented, Note: "copied to the launcher Pod"},
	{Path: "terminationGracePeriodSeconds", Support: Implemented, Note: "ACPI shutdown, then forced"},
	{Path: "startStrategy", Support: Implemented, Note: "Paused starts the guest paused"},
	{Path: "evictionStrategy", Support: Implemented, Note: "LiveMigrate (and LiveMigrateIfPossible when live-migratable): a drained VM migrates; None: it stops (and starts elsewhere if its run strategy says so); External (only with virt-api --allow-external-eviction): the eviction is refused and status.evacuationNodeName set for the administrator's controller that handles it"},
	{Path: "hostname", Support: Implemented},
	{Path: "subdomain", Support: Implemented},
	{Path: "dnsPolicy", Support: Implemented},
	{Path: "dnsConfig", Support: Implemented},
	{Path: "livenessProbe", Support: Implemented, Note: "httpGet: the launcher Pod's liveness probe through the port forwarded to the guest; a failure makes the kubelet stop the launcher, which shuts the guest down and fails the instance (reason Terminated)"},
	{Path: "livenessProbe.tcpSocket", Support: Refused, Note: "user-mode networking accepts every forwarded connection itself, so a TCP probe would always pass; use httpGet"},
	{Path: "livenessProbe.exec", Support: Refused, Note: "needs the guest agent"},
	{Path: "livenessProbe.guestAgentPing", Support: Refused, Note: "needs the guest agent"},
	{Path: "readinessProbe", Support: Implemented, Note: "httpGet: the launcher Pod's probe through the port forwarded to the guest; Ready follows it"},
	{Path: "readinessProbe.tcpSocket", Support: Refused, Note: "user-mode networking accepts every forwarded connection itself, so a TCP probe would always pass; use httpGet"},
	{Path: "readinessProbe.exec", Support: Refused, Note: "needs the guest agent"},
	{Path: "readinessProbe.guestAgentPing", Support: Refused, Note: "needs the guest agent"},
	{Path: "accessCredentials", Support: Implemented, Note: "sshPublicKey through the guest agent (the users' authorized_keys, kept in step with the Secret) or into the cloud-init seed (noCloud, configDrive); userPassword through the guest agent; condition AccessCredentialsSynchronized"},
	{Path: "architecture", Support: Implemented, Note: "amd64, the nodes' own; any other value is refused"},
	{Path: "resourceClaims", Support: Refused, Note: "dynamic resource allocation"},
	{Path: "serviceAccountName", Support: Refused},
	{Path: "utilityVolumes", Support: Refused},
}

// VMFamilies covers a VirtualMachine's own spec fields; its template is covered by InstanceFamilies.
var VMFamilies = []Family{
	{Path: "running", Support: Implemented, Note: "deprecated: a warning says to use runStrategy"},
	{Path: "runStrategy", Support: Implemented, Note: "Always, RerunOnFailure, Manual, Halted, Once"},
	{Path: "runStrategy", Support: Refused, Values: []string{"WaitAsReceiver"}, Note: "cross-cluster live migration"},
	{Path: "template", Support: Implemented},
	{Path: "instancetype", Support: Implemented, Note: "instancetype.kubevirt.io/v1beta1, namespaced or cluster kind; pinned in a ControllerRevision at the first start (status.instancetypeRef), or to revisionName; a template that sets what it fixes is refused naming the field"},
	{Path: "instancetype.inferFromVolume", Support: Refused},
	{Path: "instancetype.inferFromVolumeFailurePolicy", Support: Refused},
	{Path: "preference", Support: Implemented, Note: "fills what the template leaves unset; its requirements are checked; what it fills is checked as if the template set it"},
	{Path: "preference.inferFromVolume", Support: Refused},
	{Path: "preference.inferFromVolumeFailurePolicy", Support: Refused},
	{Path: "dataVolumeTemplates", Support: Explained, Note: "created as CDI DataVolumes owned by the VM when CDI is installed; without CDI the VM does not start and says CDI is not installed"},
	{Path: "updateVolumesStrategy", Support: Refused, Note: "volume updates of running VMs"},
}

// AnnotationFamilies are the KubeVirt annotations of an instance (or a template's metadata) that
// change what runs; Path is the annotation's key.
var AnnotationFamilies = []Family{
	{Path: "hooks.kubevirt.io/hookSidecars", Support: Refused, Note: "sidecar hooks"},
}

// UnsupportedAnnotations names every annotation AnnotationFamilies refuses; at is the annotations'
// path.
func UnsupportedAnnotations(annotations map[string]string, at *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, f := range AnnotationFamilies {
		if _, ok := annotations[f.Path]; ok && f.Support == Refused {
			errs = append(errs, field.Forbidden(at.Key(f.Path), refusal(f)))
		}
	}
	return errs
}

// Unsupported names every field of spec (marshalled as JSON would be) that families refuse; at is
// the spec's own path.
func Unsupported(spec any, families []Family, at *field.Path) field.ErrorList {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(spec)
	if err != nil {
		return field.ErrorList{field.InternalError(at, fmt.Errorf("convert the spec: %w", err))}
	}
	var errs field.ErrorList
	for _, f := range families {
		if f.Support != Refused {
			continue
		}
		visit(obj, strings.Split(f.Path, "."), at, func(p *field.Path, v any) {
			if len(f.Values) > 0 {
				if slices.Contains(f.Values, fmt.Sprint(v)) {
					errs = append(errs, field.Invalid(p, v, refusal(f)))
				}
				return
			}
			errs = append(errs, field.Forbidden(p, refusal(f)))
		})
	}
	return errs
}

func refusal(f Family) string {
	if f.Note == "" {
		return NotSupported
	}
	return NotSupported + ": " + f.Note
}

// visit calls fn with the path and value of every field at segs below v.
func visit(v any, segs []string, at *field.Path, fn func(*field.Path, any)) {
	if len(segs) == 0 {
		fn(at, v)
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	name, list := strings.CutSuffix(segs[0], "[]")
	child, ok := m[name]
	if !ok || child == nil {
		return
	}
	if !list {
		visit(child, segs[1:], at.Child(name), fn)
		return
	}
	items, _ := child.([]any)
	for i, item := range items {
		visit(item, segs[1:], at.Child(name).Index(i), fn)
	}
}
