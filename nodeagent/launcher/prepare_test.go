package launcher

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"libvirt.org/go/libvirt"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/nodeagent/launcher/diskcopy"
	"github.com/podvirt/podvirt/nodeagent/launcher/domainxml"
)

func fileFor(path, volume string) domainxml.File {
	return domainxml.File{Kind: domainxml.FileNoCloud, Path: path, Volume: volume}
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestResolveInputs finds what the disk containers copied: one image per containerDisk (format by
// magic), the kernelBoot files under the contract's names or their own base names.
func TestResolveInputs(t *testing.T) {
	private := t.TempDir()
	write(t, filepath.Join(private, launcherv1.DisksDir, "root", "cirros.qcow2"), qcow2Header(0, 0))
	write(t, filepath.Join(private, launcherv1.DisksDir, "data", "data.img"), []byte("raw"))
	// `container-disk copy /disk/x.qcow2 .../disks/flat` (no trailing slash): the image is the path itself.
	write(t, filepath.Join(private, launcherv1.DisksDir, "flat"), qcow2Header(0, 0))
	write(t, filepath.Join(private, launcherv1.KernelBootDir, launcherv1.KernelBootKernel), []byte("kernel"))
	write(t, filepath.Join(private, launcherv1.KernelBootDir, "initramfs.gz"), []byte("initrd"))
	vmi := &virtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "v", Namespace: "ns"},
		Spec: virtv1.VirtualMachineInstanceSpec{
			Domain: virtv1.DomainSpec{Firmware: &virtv1.Firmware{KernelBoot: &virtv1.KernelBoot{Container: &virtv1.KernelBootContainer{
				Image: "k", KernelPath: "/boot/vmlinuz", InitrdPath: "/boot/initramfs.gz"}}}},
			Volumes: []virtv1.Volume{
				{Name: "root", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "a"}}},
				{Name: "data", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "b"}}},
				{Name: "flat", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "d"}}},
				{Name: "missing", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "c"}}},
				{Name: "pvc", VolumeSource: virtv1.VolumeSource{PersistentVolumeClaim: &virtv1.PersistentVolumeClaimVolumeSource{ClaimName: "x"}}},
			},
		},
	}
	in, err := resolveInputs(vmi, &Config{PrivateDir: private}, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := in.ContainerDisks["root"]; got.Format != "qcow2" || filepath.Base(got.Path) != "cirros.qcow2" {
		t.Errorf("root = %+v", got)
	}
	if got := in.ContainerDisks["data"]; got.Format != "raw" {
		t.Errorf("data = %+v", got)
	}
	if got := in.ContainerDisks["flat"]; got.Format != "qcow2" || filepath.Base(got.Path) != "flat" {
		t.Errorf("flat = %+v", got)
	}
	if _, ok := in.ContainerDisks["missing"]; ok {
		t.Error("an image was found for a volume nothing was copied for")
	}
	if filepath.Base(in.Kernel) != launcherv1.KernelBootKernel || filepath.Base(in.Initrd) != "initramfs.gz" || !in.Emulation {
		t.Errorf("kernel %q initrd %q emulation %v", in.Kernel, in.Initrd, in.Emulation)
	}

	write(t, filepath.Join(private, launcherv1.DisksDir, "root", "second.img"), []byte("x"))
	if _, err := resolveInputs(vmi, &Config{PrivateDir: private}, true); err == nil ||
		!strings.Contains(err.Error(), "spec.volumes[name=root].containerDisk: want exactly one image file") {
		t.Fatalf("two images for one volume: %v", err)
	}
}

// qcow2Header is a qcow2 v3 header as qemu-img writes it (layout checked against qemu-img 7.2's
// output: `qemu-img create -b` puts the backing name's offset at bytes 8-15, `-o data_file=` sets
// incompatible feature bit 2 at bytes 72-79).
func qcow2Header(backingOffset, incompatible uint64) []byte {
	h := make([]byte, 104)
	copy(h, "QFI\xfb")
	binary.BigEndian.PutUint32(h[4:], 3)
	binary.BigEndian.PutUint64(h[8:], backingOffset)
	binary.BigEndian.PutUint32(h[20:], 16) // cluster bits
	binary.BigEndian.PutUint64(h[72:], incompatible)
	return h
}

// A container disk is someone's image: one that names another file (a backing file, an external
// data file) would have qemu open that file, so it is refused naming the volume.
func TestContainerDiskNamingAnotherFileIsRefused(t *testing.T) {
	for name, image := range map[string][]byte{
		"backing file":       qcow2Header(0x210, 0),
		"external data file": qcow2Header(0, 1<<2),
		"truncated header":   []byte("QFI\xfb\x00\x00\x00\x03"),
	} {
		private := t.TempDir()
		write(t, filepath.Join(private, launcherv1.DisksDir, "root", "disk.qcow2"), image)
		vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "v", Namespace: "ns"}, Spec: virtv1.VirtualMachineInstanceSpec{
			Volumes: []virtv1.Volume{{Name: "root", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "a"}}}},
		}}
		_, err := resolveInputs(vmi, &Config{PrivateDir: private}, true)
		if err == nil || !strings.Contains(err.Error(), "spec.volumes[name=root].containerDisk: image disk.qcow2: ") {
			t.Errorf("%s: %v, want a refusal naming the volume", name, err)
		}
	}
}

// TestPVCImage keeps an existing image and creates a missing one sparse with the volume's free space.
func TestPVCImage(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	if err := ensurePVCImage(img); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() <= 0 || st.Size()%(1<<20) != 0 {
		t.Fatalf("size %d: want whole MiB of free space", st.Size())
	}
	write(t, img, []byte("guest data"))
	if err := ensurePVCImage(img); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(img); string(data) != "guest data" {
		t.Fatal("an existing PVC image was replaced")
	}
}

// TestSeedFromSecretVolume reads cloud-init data from a mounted secret volume (keys as files,
// kubelet's ..data entries ignored).
func TestSeedFromSecretVolume(t *testing.T) {
	secrets := t.TempDir()
	write(t, filepath.Join(secrets, "ud", "..2026_11_22", "userdata"), []byte("#!/bin/sh\necho from secret\n"))
	if err := os.Symlink("..2026_11_22", filepath.Join(secrets, "ud", "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/userdata", filepath.Join(secrets, "ud", "userdata")); err != nil {
		t.Fatal(err)
	}
	vmi := &virtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "v", Namespace: "ns"},
		Spec: virtv1.VirtualMachineInstanceSpec{Volumes: []virtv1.Volume{{Name: "ci", VolumeSource: virtv1.VolumeSource{
			CloudInitNoCloud: &virtv1.CloudInitNoCloudSource{SecretRef: &corev1.LocalObjectReference{Name: "ud"}}}}}},
	}
	iso := filepath.Join(t.TempDir(), "ci.iso")
	if err := createSeed(vmi, fileFor(iso, "ci"), secrets); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(iso)
	if err != nil || !strings.Contains(string(data), "echo from secret") {
		t.Fatalf("seed does not carry the secret's user data: %v", err)
	}
}

// awaitInputs waits for the disk containers' files: present at once, written meanwhile, never
// written (503, naming the field), or a copy that failed (400 with its reason).
func TestAwaitInputs(t *testing.T) {
	vmi := &virtv1.VirtualMachineInstance{Spec: virtv1.VirtualMachineInstanceSpec{
		Domain: virtv1.DomainSpec{Firmware: &virtv1.Firmware{KernelBoot: &virtv1.KernelBoot{Container: &virtv1.KernelBootContainer{
			Image: "k", KernelPath: "/boot/vmlinuz"}}}},
		Volumes: []virtv1.Volume{{Name: "root", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "a"}}}},
	}}
	private := t.TempDir()
	cfg := &Config{PrivateDir: private}
	kernel := filepath.Join(private, launcherv1.KernelBootDir, launcherv1.KernelBootKernel)
	root := filepath.Join(private, launcherv1.DisksDir, "root")
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}

	write(t, kernel, []byte("kernel"))
	err := awaitInputs(short(), vmi, cfg)
	if !errors.Is(err, errNotReady) || !strings.Contains(err.Error(), "spec.volumes[name=root].containerDisk: still being copied") {
		t.Fatalf("nothing copied for root: %v, want errNotReady naming the volume", err)
	}

	done := make(chan error, 1)
	go func() { done <- awaitInputs(context.Background(), vmi, cfg) }()
	write(t, root, []byte("QFI\xfb"))
	if err := <-done; err != nil {
		t.Fatalf("root written while waiting: %v", err)
	}

	if err := diskcopy.RecordFailure(kernel, errors.New("source: stat /boot/vmlinuz: no such file or directory")); err != nil {
		t.Fatal(err)
	}
	err = awaitInputs(short(), vmi, cfg)
	if !errors.Is(err, errBadRequest) || !strings.Contains(err.Error(), "spec.domain.firmware.kernelBoot.container.kernelPath: source: stat /boot/vmlinuz") {
		t.Fatalf("a failed copy: %v, want errBadRequest naming the field and the cause", err)
	}
}

// libvirt refusing a configuration fails the instance (a bad request); failing to start it does not.
func TestRefusedConfig(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("start: %w", libvirt.Error{Code: libvirt.ERR_CONFIG_UNSUPPORTED, Message: "TPM version '2.0' is not supported"}), true},
		{libvirt.Error{Code: libvirt.ERR_XML_ERROR}, true},
		{libvirt.Error{Code: libvirt.ERR_INTERNAL_ERROR, Message: "qemu unexpectedly closed the monitor"}, false},
		{errors.New("plain"), false},
	} {
		if got := refusedConfig(tc.err); got != tc.want {
			t.Errorf("refusedConfig(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// A persistent TPM's state and EFI variables go to the state volume, which must be there
// (mounted), never made.
func TestPreparePersistentState(t *testing.T) {
	root, state := t.TempDir(), filepath.Join(t.TempDir(), "state")
	cfg := &Config{LibvirtRoot: root, StateDir: state}
	const id = "0d2a2043-41c0-59c3-9b17-025022203668"
	spec := &virtv1.VirtualMachineInstanceSpec{Domain: virtv1.DomainSpec{
		Devices:  virtv1.Devices{TPM: &virtv1.TPMDevice{Persistent: ptr.To(true)}},
		Firmware: &virtv1.Firmware{Bootloader: &virtv1.Bootloader{EFI: &virtv1.EFI{Persistent: ptr.To(true)}}},
	}}
	if err := preparePersistentState(cfg, spec, id); !errors.Is(err, errBadRequest) {
		t.Fatalf("without the state volume: want a bad request, got %v", err)
	}
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	for range 2 { // a second start finds the link of the first
		if err := preparePersistentState(cfg, spec, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := preparePersistentState(cfg, spec, "../../escape"); !errors.Is(err, errBadRequest) {
		t.Errorf("a domain UUID that is not one becomes no path: want a bad request, got %v", err)
	}
	target, err := os.Readlink(filepath.Join(root, "lib", "swtpm", id))
	if err != nil || target != filepath.Join(state, launcherv1.TPMStateSubdir) {
		t.Errorf("link to %q (%v), want the state volume's %s", target, err, launcherv1.TPMStateSubdir)
	}
	if st, err := os.Stat(filepath.Dir(filepath.Join(state, launcherv1.EFIVarsFile))); err != nil || !st.IsDir() {
		t.Errorf("no directory for the EFI variables: %v", err)
	}
}
