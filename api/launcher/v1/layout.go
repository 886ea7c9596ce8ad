package v1

import (
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Names and paths inside the launcher Pod. The controller renders the Pod with them, the launcher
// creates its files there, and the node agent reaches the same directory from the node through the
// kubelet's emptyDir path (see HostPrivateDir).
const (
	// LauncherUID is the non-root user (and group) every launcher container runs as: qemu in the
	// launcher image's /etc/passwd (mk/launcher.mk reads this line to build the image).
	LauncherUID = 107

	// ComputeContainer runs the launcher (libvirt + qemu).
	ComputeContainer = "compute"
	// ConsoleLogContainer streams the guest's serial console log to its stdout, so `kubectl logs
	// POD -c guest-console-log` shows what the guest printed.
	ConsoleLogContainer = "guest-console-log"

	// PrivateVolume is the emptyDir shared by the launcher's containers and reached by the node agent.
	PrivateVolume = "podvirt-private"
	// PrivateDir is where PrivateVolume is mounted in every launcher container.
	PrivateDir = "/var/run/podvirt"

	// CommandSocket is the command protocol's unix socket, relative to PrivateDir.
	CommandSocket = "launcher.sock"
	// SerialSocket is the guest's serial console (one reader at a time), relative to PrivateDir.
	SerialSocket = "serial0.sock"
	// GuestAgentSocket is the host side of the guest agent's channel, relative to PrivateDir: libvirt's
	// own (it is the only one talking to the agent), kept here for a short path.
	GuestAgentSocket = "ga.sock"
	// VNCSocket is the guest's VNC display, relative to PrivateDir.
	VNCSocket = "vnc.sock"
	// SerialLog is the file the guest's serial output is also written to, relative to PrivateDir.
	SerialLog = "serial0.log"
	// DisksDir holds the disk images the disk containers copy out of containerDisk and kernelBoot
	// images (DisksDir/<volume name>/...), relative to PrivateDir. The images are never modified:
	// the launcher puts a copy-on-write overlay on top.
	DisksDir = "disks"
	// KernelBootDir holds the kernel and initrd copied from a kernelBoot container, relative to PrivateDir.
	KernelBootDir = "kernelboot"
	// KernelBootKernel and KernelBootInitrd are the names the disk container gives the kernelPath and
	// initrdPath files in KernelBootDir (the launcher also accepts the files under their own base names).
	KernelBootKernel = "kernel"
	KernelBootInitrd = "initrd"
	// MigrationDir holds a live migration's unix sockets, relative to PrivateDir: on the target the
	// launcher's libvirt daemon listens on MigrationLibvirtSocket, and qemu on MigrationMemorySocket
	// and MigrationDisksSocket (the memory stream and the NBD server the disks are copied to); on
	// the source the node agent serves the same three names, each proxied to the target's through
	// the node agents. The paths are the same in both Pods, so one URI names each on both sides.
	MigrationDir           = "migration"
	MigrationLibvirtSocket = "libvirt-sock"
	MigrationMemorySocket  = "memory.sock"
	MigrationDisksSocket   = "disks.sock"
	// ExitFile is written by the launcher just before it exits, relative to PrivateDir: its final Status
	// as JSON. The guest-console-log container stops following the serial log when it appears, and the
	// node agent can read how the guest ended after the launcher is gone.
	ExitFile = "launcher-exit.json"

	// BinVolume is the emptyDir the compute container's postStart hook copies the static
	// container-disk helper into, so that images without any binaries (containerDisk images are
	// often FROM scratch) can run it.
	BinVolume = "podvirt-bin"
	// BinDir is where BinVolume is mounted.
	BinDir = "/var/run/podvirt-bin"
	// ContainerDiskBinary is the static helper in the launcher image (`container-disk install DIR`
	// copies itself to DIR; `container-disk serve PRIVATE_DIR SRC DST…` copies files sparsely, then
	// stays while the launcher runs).
	ContainerDiskBinary = "/usr/bin/container-disk"

	// PVCMountRoot is where PersistentVolumeClaim volumes are mounted (PVCMountRoot/<volume name>/);
	// the launcher keeps the guest's disk image there as disk.img (created sparse if absent).
	PVCMountRoot = "/var/run/podvirt/pvc"

	// HostDiskMountRoot is where the node directory of each hostDisk volume is mounted
	// (HostDiskMountRoot/<volume name>/, the image file keeps its name); the node agent creates
	// and hands the file to LauncherUID before the launcher starts the guest.
	HostDiskMountRoot = "/var/run/podvirt-hostdisks"
	// HostDiskRoot is the node directory hostDisk paths must be under: the node agent manages
	// files there and nowhere else.
	HostDiskRoot = "/var/lib/podvirt/hostdisks"

	// ConfigDiskMountRoot is where the configMap, secret, serviceAccount and downwardAPI volumes of
	// a VMI are mounted (ConfigDiskMountRoot/<volume name>/); the launcher makes each an ISO disk.
	ConfigDiskMountRoot = "/var/run/podvirt-configdisks"

	// PersistentStateVolume is the launcher Pod's volume of the claim that keeps a VM's state across
	// restarts (a persistent TPM's); it is mounted at PersistentStateDir in the compute container.
	PersistentStateVolume = "persistent-state"
	// PersistentStateDir is where PersistentStateVolume is mounted; the TPM's state is in its
	// TPMStateSubdir, the EFI variables in EFIVarsFile.
	PersistentStateDir = "/var/run/podvirt-state"
	// TPMStateSubdir holds swtpm's state, relative to PersistentStateDir.
	TPMStateSubdir = "swtpm"
	// EFIVarsFile is the guest's EFI variable store (OVMF's VARS), relative to PersistentStateDir.
	EFIVarsFile = "efi/VARS.fd"

	// HugepagesVolume is the launcher Pod's hugetlbfs emptyDir (medium HugePages-<size>) when guest
	// memory is backed by huge pages; mounted at HugepagesDir, which the launcher names to libvirt.
	HugepagesVolume = "hugepages"
	HugepagesDir    = "/dev/hugepages"

	// SecretMountRoot is where the Secrets a VMI's cloudInitNoCloud volumes refer to (secretRef,
	// networkDataSecretRef) and its accessCredentials' Secrets are mounted read-only in the compute container: SecretMountRoot/<secret
	// name>/<key>, one file per key (an ordinary secret volume).
	SecretMountRoot = "/var/run/podvirt-secrets"
)

// HostPrivateDir is PrivateDir seen from the node: the kubelet keeps emptyDir volumes at
// <kubeletRoot>/pods/<podUID>/volumes/kubernetes.io~empty-dir/<volume>.
func HostPrivateDir(kubeletRoot, podUID string) string {
	return kubeletRoot + "/pods/" + podUID + "/volumes/kubernetes.io~empty-dir/" + PrivateVolume
}

// Device plugin resources the node agent advertises and launcher Pods request.
const (
	// DeviceResourcePrefix is the prefix of every resource the node agent advertises.
	DeviceResourcePrefix = "devices.kubevirt.io/"
	// KVMResource is /dev/kvm; advertised only where KVM is really usable.
	KVMResource = DeviceResourcePrefix + "kvm"
	// TunResource is /dev/net/tun.
	TunResource = DeviceResourcePrefix + "tun"
	// VhostNetResource is /dev/vhost-net.
	VhostNetResource = DeviceResourcePrefix + "vhost-net"
)

// RequestsKVM reports whether the launcher Pod's compute container requests KVMResource: virt-controller
// requests it unless the cluster runs guests under emulation, and a guest without it runs emulated.
func RequestsKVM(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == ComputeContainer {
			_, ok := c.Resources.Limits[corev1.ResourceName(KVMResource)]
			return ok
		}
	}
	return false
}

// Labels and annotations on launcher Pods.
const (
	// AppLabel is kubevirt.io=virt-launcher on every launcher Pod.
	AppLabel = "kubevirt.io"
	// AppLabelValue is the value of AppLabel on launcher Pods.
	AppLabelValue = "virt-launcher"
	// DomainLabel carries the VMI's name (used by `virtctl expose`).
	DomainLabel = "kubevirt.io/domain"
	// CreatedByLabel carries the VMI's UID.
	CreatedByLabel = "kubevirt.io/created-by"
	// InstanceIDLabel carries the VMI's name (KubeVirt's vmi.kubevirt.io/id: Services made by
	// KubeVirt tooling, and `virtctl expose`, select on it).
	InstanceIDLabel = "vmi.kubevirt.io/id"
	// VMNameLabel carries the VMI's name too, as on KubeVirt's launcher Pods (vm.kubevirt.io/name).
	VMNameLabel = "vm.kubevirt.io/name"
	// MigrationJobLabel marks a migration target's launcher Pod with the migration's UID (KubeVirt's
	// kubevirt.io/migrationJobUID): the target node's agent prepares such a Pod for the guest.
	MigrationJobLabel = "kubevirt.io/migrationJobUID"
)

// HostDiskNamespaceUIDFile, in HostDiskDir(namespace) on a node, holds the UID of the namespace
// whose images the directory holds: the node agent removes them once that namespace is gone.
const HostDiskNamespaceUIDFile = ".podvirt-namespace-uid"

// HostDiskDir is the directory an instance's hostDisk images must be in: its namespace's under
// HostDiskRoot, so that no instance reaches another namespace's images.
func HostDiskDir(namespace string) string { return HostDiskRoot + "/" + namespace + "/" }

// InHostDiskDir reports whether p is a clean path under HostDiskDir(namespace): the one check
// admission, the launcher Pod's rendering and the node agent each make of a hostDisk path.
func InHostDiskDir(namespace, p string) bool {
	return path.Clean(p) == p && strings.HasPrefix(p, HostDiskDir(namespace))
}
