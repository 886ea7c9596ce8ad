package launcher

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/nodeagent/launcher/cloudinit"
	"github.com/podvirt/podvirt/nodeagent/launcher/credentials"
	"github.com/podvirt/podvirt/nodeagent/launcher/diskcopy"
	"github.com/podvirt/podvirt/nodeagent/launcher/domainxml"
	"github.com/podvirt/podvirt/nodeagent/launcher/isoimage"
)

// qcow2Magic starts every qcow2 image ("QFI\xfb").
var qcow2Magic = []byte{'Q', 'F', 'I', 0xfb}

// Waiting for the disk containers' files: one sync waits at most inputsWait (the node agent asks
// again 100 ms later: a long poll that holds one of its workers ≈ 90% of the time, only while a
// copy is under way), looking every inputsLook.
const (
	inputsWait = time.Second
	inputsLook = 20 * time.Millisecond
)

// awaitInputs waits until the disk containers have written every file the instance needs (one per
// containerDisk volume, the kernelBoot kernel and initrd): errNotReady when they have not within
// inputsWait, errBadRequest naming the field when a copy failed.
func awaitInputs(ctx context.Context, vmi *virtv1.VirtualMachineInstance, cfg *Config) error {
	type input struct{ field, path string }
	var inputs []input
	for _, vol := range vmi.Spec.Volumes {
		if vol.ContainerDisk != nil {
			inputs = append(inputs, input{fmt.Sprintf("spec.volumes[name=%s].containerDisk", vol.Name), filepath.Join(cfg.PrivateDir, launcherv1.DisksDir, vol.Name)})
		}
	}
	if fw := vmi.Spec.Domain.Firmware; fw != nil && fw.KernelBoot != nil && fw.KernelBoot.Container != nil {
		dir, c := filepath.Join(cfg.PrivateDir, launcherv1.KernelBootDir), fw.KernelBoot.Container
		if c.KernelPath != "" {
			inputs = append(inputs, input{"spec.domain.firmware.kernelBoot.container.kernelPath", filepath.Join(dir, launcherv1.KernelBootKernel)})
		}
		if c.InitrdPath != "" {
			inputs = append(inputs, input{"spec.domain.firmware.kernelBoot.container.initrdPath", filepath.Join(dir, launcherv1.KernelBootInitrd)})
		}
	}
	ctx, cancel := context.WithTimeout(ctx, inputsWait)
	defer cancel()
	tick := time.NewTicker(inputsLook)
	defer tick.Stop()
	for {
		missing := ""
		for _, in := range inputs {
			if why, failed := diskcopy.Failure(in.path); failed {
				return fmt.Errorf("%w: %s: %s", errBadRequest, in.field, why)
			}
			if _, err := os.Stat(in.path); err != nil && missing == "" {
				missing = in.field
			}
		}
		if missing == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s: still being copied out of its image", errNotReady, missing)
		case <-tick.C:
		}
	}
}

// resolveInputs finds what the disk containers copied into the private dir: one image per
// containerDisk volume (the single file in disks/<volume>/) and the kernelBoot kernel and initrd.
func resolveInputs(vmi *virtv1.VirtualMachineInstance, cfg *Config, emulation bool) (domainxml.Inputs, error) {
	in := domainxml.Inputs{
		Emulation:      emulation,
		PrivateDir:     cfg.PrivateDir,
		PVCRoot:        cfg.PVCRoot,
		StateDir:       cfg.StateDir,
		ContainerDisks: map[string]domainxml.Image{},
	}
	for _, vol := range vmi.Spec.Volumes {
		if vol.ContainerDisk == nil {
			continue
		}
		dir := filepath.Join(cfg.PrivateDir, launcherv1.DisksDir, vol.Name)
		img, err := findImage(dir)
		if err != nil {
			return in, fmt.Errorf("spec.volumes[name=%s].containerDisk: %w", vol.Name, err)
		}
		if img.Path != "" {
			in.ContainerDisks[vol.Name] = img
		}
	}
	if size, _ := vmi.Spec.Domain.HugepageSize(); size > 0 && hugetlbfsConf(cfg.HugepagesDir) == "" {
		return in, fmt.Errorf("spec.domain.memory.hugepages: no hugetlbfs at %s (the Pod's HugePages volume)", cfg.HugepagesDir)
	}
	fw := vmi.Spec.Domain.Firmware
	if fw != nil && fw.KernelBoot != nil && fw.KernelBoot.Container != nil {
		c := fw.KernelBoot.Container
		dir := filepath.Join(cfg.PrivateDir, launcherv1.KernelBootDir)
		in.Kernel = findFile(dir, launcherv1.KernelBootKernel, c.KernelPath)
		in.Initrd = findFile(dir, launcherv1.KernelBootInitrd, c.InitrdPath)
	}
	return in, nil
}

// findImage is the one regular file in dir and its format; an empty Image when dir does not exist.
// dir may also be the image itself (what a disk container's `container-disk serve … SRC
// disks/<volume>` writes: no trailing slash, a path that did not exist yet).
func findImage(dir string) (domainxml.Image, error) {
	st, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return domainxml.Image{}, nil
	}
	if err == nil && st.Mode().IsRegular() {
		format, err := imageFormat(dir)
		return domainxml.Image{Path: dir, Format: format}, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return domainxml.Image{}, fmt.Errorf("read %s: %w", dir, err)
	}
	var files []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	if len(files) != 1 {
		return domainxml.Image{}, fmt.Errorf("want exactly one image file in %s, found %d", dir, len(files))
	}
	format, err := imageFormat(files[0])
	if err != nil {
		return domainxml.Image{}, err
	}
	return domainxml.Image{Path: files[0], Format: format}, nil
}

// qcow2HeaderSize covers the fields checkQcow2 reads: backing_file_offset (bytes 8-15) and, from
// version 3 on, incompatible_features (bytes 72-79).
const qcow2HeaderSize = 80

// imageFormat is "qcow2" for a qcow2 image and "raw" for anything else; a qcow2 image that names
// another file is refused (checkQcow2).
func imageFormat(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("open image: %w", err)
	}
	defer f.Close()
	head := make([]byte, qcow2HeaderSize)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read image %s: %w", path, err)
	}
	if !bytes.HasPrefix(head[:n], qcow2Magic) {
		return "raw", nil
	}
	if err := checkQcow2(head[:n]); err != nil {
		return "", fmt.Errorf("image %s: %w", filepath.Base(path), err)
	}
	return "qcow2", nil
}

// checkQcow2 refuses a qcow2 header that makes qemu open another file: a backing file (qemu would
// follow its name, letting an image read any file the launcher can, as KubeVirt also refuses) or
// an external data file (incompatible feature bit 2).
func checkQcow2(head []byte) error {
	if len(head) < 20 {
		return errors.New("truncated qcow2 header")
	}
	if binary.BigEndian.Uint64(head[8:16]) != 0 {
		return errors.New("a qcow2 image with a backing file is refused: flatten it (qemu-img convert -O qcow2) first")
	}
	if version := binary.BigEndian.Uint32(head[4:8]); version >= 3 {
		if len(head) < qcow2HeaderSize {
			return errors.New("truncated qcow2 v3 header")
		}
		if binary.BigEndian.Uint64(head[72:80])&(1<<2) != 0 {
			return errors.New("a qcow2 image with an external data file is refused")
		}
	}
	return nil
}

// findFile is dir/name, else dir/<base of specPath>, else "" (also when specPath is empty).
func findFile(dir, name, specPath string) string {
	if specPath == "" {
		return ""
	}
	for _, p := range []string{filepath.Join(dir, name), filepath.Join(dir, filepath.Base(specPath))} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// prepareFiles creates the files the domain needs: overlays, sparse disks, PVC images, seeds.
func prepareFiles(ctx context.Context, vmi *virtv1.VirtualMachineInstance, plan *domainxml.Plan, cfg *Config) error {
	for _, f := range plan.Files {
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
			return fmt.Errorf("create directory for %s: %w", f.Path, err)
		}
		var err error
		switch f.Kind {
		case domainxml.FileOverlay:
			err = createOverlay(ctx, f, cfg.QemuImg)
		case domainxml.FileSparse:
			err = createSparse(f.Path, f.Size, true)
		case domainxml.FilePVCImage:
			err = ensurePVCImage(f.Path)
		case domainxml.FileConfigISO:
			var files []isoimage.File
			if files, err = isoimage.FromDir(f.Source); err == nil {
				err = isoimage.Write(f.Path, f.Label, files)
			}
			if err != nil { // the volume's content cannot become a disk: the instance fails naming it
				err = fmt.Errorf("%w: spec.volumes[name=%s]: %w", errBadRequest, f.Volume, err)
			}
		case domainxml.FileHostDisk:
			if _, err = os.Stat(f.Path); err != nil {
				err = fmt.Errorf("host disk image: %w", err)
			}
		case domainxml.FileNoCloud, domainxml.FileConfigDrive:
			err = createSeed(vmi, f, cfg.SecretsDir)
		default:
			err = fmt.Errorf("unknown file kind %q", f.Kind)
		}
		if err != nil {
			return fmt.Errorf("volume %s: %w", f.Volume, err)
		}
	}
	return nil
}

// preparePersistentState readies the persistent state volume for what the instance keeps on it:
// the directory of its EFI variables (libvirt copies OVMF's template there when there is none yet),
// and its TPM's state, linked from the embedded driver's swtpm directory for the domain
// (lib/swtpm/<uuid> under its root; swtpm_setup manufactures a TPM there only when none is there).
func preparePersistentState(cfg *Config, spec *virtv1.VirtualMachineInstanceSpec, domainUUID string) error {
	if !spec.PersistentState() {
		return nil
	}
	if _, err := os.Stat(cfg.StateDir); err != nil { // not made here: its content would not persist
		fld := "spec.domain.devices.tpm.persistent"
		if spec.Domain.EFIPersistent() {
			fld = "spec.domain.firmware.bootloader.efi.persistent"
		}
		return fmt.Errorf("%w: %s: no persistent state volume: %w", errBadRequest, fld, err)
	}
	if spec.Domain.EFIPersistent() {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(cfg.StateDir, launcherv1.EFIVarsFile)), 0o700); err != nil {
			return fmt.Errorf("create the EFI variables directory: %w", err)
		}
	}
	if !spec.Domain.Devices.TPMPersistent() {
		return nil
	}
	state := filepath.Join(cfg.StateDir, launcherv1.TPMStateSubdir)
	if err := os.MkdirAll(state, 0o700); err != nil {
		return fmt.Errorf("create the TPM state directory: %w", err)
	}
	if _, err := uuid.Parse(domainUUID); err != nil { // admission checks it too; it becomes a path here
		return fmt.Errorf("%w: spec.domain.firmware.uuid: %q is not a UUID", errBadRequest, domainUUID)
	}
	link := filepath.Join(cfg.LibvirtRoot, "lib", "swtpm", domainUUID)
	if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
		return fmt.Errorf("create swtpm directory: %w", err)
	}
	if err := os.RemoveAll(link); err != nil {
		return fmt.Errorf("remove old swtpm state link: %w", err)
	}
	if err := os.Symlink(state, link); err != nil {
		return fmt.Errorf("link the TPM state to the persistent state volume: %w", err)
	}
	return nil
}

// createOverlay makes a fresh qcow2 overlay on top of the read-only image the disk container copied.
func createOverlay(ctx context.Context, f domainxml.File, qemuImg string) error {
	if err := os.Remove(f.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove old overlay: %w", err)
	}
	cmd := exec.CommandContext(ctx, qemuImg, "create", "-q", "-f", "qcow2",
		"-b", f.Backing, "-F", f.BackingFormat, f.Path)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("qemu-img create overlay on %s: %w: %s", f.Backing, err, bytes.TrimSpace(out))
	}
	return nil
}

// createSparse creates a sparse file of size bytes (replacing an old one when fresh is set).
func createSparse(path string, size int64, fresh bool) error {
	flags := os.O_CREATE | os.O_WRONLY
	if fresh {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return fmt.Errorf("size %s: %w", path, err)
	}
	return f.Close()
}

// ensurePVCImage keeps an existing disk.img and otherwise creates it sparse with the size of the
// filesystem it lives on (what the PVC offers), rounded down to whole MiB.
func ensurePVCImage(path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(path), &st); err != nil {
		return fmt.Errorf("statfs %s: %w", filepath.Dir(path), err)
	}
	size := int64(st.Bavail) * st.Bsize &^ (1<<20 - 1)
	if size <= 0 {
		return fmt.Errorf("no space on the volume for %s", path)
	}
	return createSparse(path, size, false)
}

// createSeed builds the NoCloud ISO; secrets come from secretsDir/<name>/<key>.
func createSeed(vmi *virtv1.VirtualMachineInstance, f domainxml.File, secretsDir string) error {
	seed, err := cloudinit.SeedFor(vmi, f.Volume, credentials.MountedSecrets(secretsDir))
	if err != nil {
		return err
	}
	if f.Kind == domainxml.FileConfigDrive {
		return cloudinit.WriteConfigDrive(f.Path, seed)
	}
	return cloudinit.WriteISO(f.Path, seed)
}
