//go:build launcher

package launcher_test

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/qemumem"
	"github.com/podvirt/podvirt/nodeagent/launcher"
	"github.com/podvirt/podvirt/nodeagent/launcher/diskcopy"
)

// demoGuestEnv names the directory of the demo guest (busybox + small kernel) that hack/guest/build.sh
// built for the current sources; `make launcher-test` builds it first and sets it.
const demoGuestEnv = "PODVIRT_DEMO_GUEST"

// demoGuest is the demo guest's directory. A missing guest is a failure, never a skip: these are the
// only launcher tests that boot a real OS and the only automated check of the per-VM memory figure.
func demoGuest(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(demoGuestEnv)
	if dir == "" {
		t.Fatalf("%s is not set: run these tests with `make launcher-test`, which builds the demo guest and sets it", demoGuestEnv)
	}
	for _, f := range []string{".done", "demo.qcow2", "vmlinuz", "initramfs.gz"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("%s=%s is not a finished demo guest build: %v", demoGuestEnv, dir, err)
		}
	}
	return dir
}

// TestRealGuestContainerDisk is the seed's vm-cirros example with the demo guest as its containerDisk:
// 64M of memory, the seed's cloud-init user data, then an ACPI shutdown. It also measures the
// launcher's memory overhead.
func TestRealGuestContainerDisk(t *testing.T) {
	guest := demoGuest(t)
	p := startPod(t, "cirros")
	v := vmi("cirros", 30)
	src := t.TempDir()
	if _, err := diskcopy.Copy(filepath.Join(guest, "demo.qcow2"), src+"/"); err != nil {
		t.Fatal(err)
	}
	if _, err := diskcopy.Copy(src, filepath.Join(p.private, launcherv1.DisksDir, "containerdisk")+"/"); err != nil {
		t.Fatal(err)
	}
	v.Spec.Domain.Devices.Disks = []virtv1.Disk{
		{Name: "containerdisk", Disk: &virtv1.DiskTarget{Bus: "virtio"}},
		{Name: "cloudinitdisk", Disk: &virtv1.DiskTarget{Bus: "virtio"}},
	}
	v.Spec.Volumes = []virtv1.Volume{
		{Name: "containerdisk", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "kubevirt/cirros-container-disk-demo:latest"}}},
		{Name: "cloudinitdisk", VolumeSource: virtv1.VolumeSource{CloudInitNoCloud: &virtv1.CloudInitNoCloudSource{
			UserDataBase64: "IyEvYmluL3NoCgplY2hvICdwcmludGVkIGZyb20gY2xvdWQtaW5pdCB1c2VyZGF0YScK"}}},
	}
	t0 := time.Now()
	p.sync(v)
	serial := filepath.Join(p.private, launcherv1.SerialLog)
	waitLog(t, 90*time.Second, serial, "printed from cloud-init userdata")
	t.Logf("sync → cloud-init user data ran in the guest: %s", time.Since(t0).Round(time.Millisecond))
	waitLog(t, 30*time.Second, serial, "user-data exited")

	reportMemory(t, p, 65011712)

	t1 := time.Now()
	p.must(http.StatusAccepted, http.MethodPost, launcherv1.PathShutdown, launcherv1.ShutdownRequest{GracePeriodSeconds: 30})
	code, final := p.waitExit(45 * time.Second)
	t.Logf("ACPI shutdown of the demo guest → launcher exit: %s", time.Since(t1).Round(time.Millisecond))
	if code != 0 || final.Reason != launcherv1.ReasonGuestShutdown {
		t.Fatalf("exit %d, final %+v", code, final)
	}
}

// TestRealGuestEFI boots the demo disk through OVMF (no Secure Boot) in 256Mi: the firmware finds the
// disk's \EFI\BOOT\BOOTX64.EFI (syslinux.efi), which starts the kernel's EFI stub. The VM has a TPM
// (swtpm, manufactured by swtpm_setup as the launcher's user), which the guest kernel finds.
func TestRealGuestEFI(t *testing.T) {
	guest := demoGuest(t)
	p := startPod(t, "efi")
	v := vmi("efi", 0)
	if _, err := diskcopy.Copy(filepath.Join(guest, "demo.qcow2"), filepath.Join(p.private, launcherv1.DisksDir, "containerdisk")+"/"); err != nil {
		t.Fatal(err)
	}
	v.Spec.Domain.Firmware.Bootloader = &virtv1.Bootloader{EFI: &virtv1.EFI{SecureBoot: new(bool)}}
	v.Spec.Domain.Devices.TPM = &virtv1.TPMDevice{}
	// Under OVMF the demo guest needs ≥ 128 MiB (at 122 MiB it hangs after syslinux.efi loads it).
	v.Spec.Domain.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("256Mi")
	v.Spec.Domain.Devices.Disks = []virtv1.Disk{{Name: "containerdisk", Disk: &virtv1.DiskTarget{Bus: "virtio"}}}
	v.Spec.Volumes = []virtv1.Volume{{Name: "containerdisk", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "kubevirt/cirros-container-disk-demo:latest"}}}}
	t0 := time.Now()
	p.sync(v)
	serial := filepath.Join(p.private, launcherv1.SerialLog)
	waitLog(t, 120*time.Second, serial, "Podvirt demo guest")
	waitLog(t, 30*time.Second, serial, "booted")
	t.Logf("sync → the demo guest booted through OVMF: %s", time.Since(t0).Round(time.Millisecond))
	raw, err := os.ReadFile(serial)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "efi: EFI v") {
		t.Errorf("the kernel did not start under EFI:\n%s", raw)
	}
	if !strings.Contains(string(raw), "2.0 TPM") {
		t.Errorf("the guest found no TPM 2.0:\n%s", raw)
	}
}

// bootOnce boots the demo disk in a new launcher for VMI ns/name with the user data (after mutate),
// waits for the user data to finish, shuts the guest down (ACPI) and returns its serial console.
func bootOnce(t *testing.T, name, userData string, mutate func(*virtv1.VirtualMachineInstance)) string {
	t.Helper()
	p, serial := bootDemo(t, name, userData, mutate)
	waitLog(t, 120*time.Second, serial, "user-data exited")
	raw, err := os.ReadFile(serial)
	if err != nil {
		t.Fatal(err)
	}
	p.must(http.StatusAccepted, http.MethodPost, launcherv1.PathShutdown, launcherv1.ShutdownRequest{GracePeriodSeconds: 30})
	if code, final := p.waitExit(60 * time.Second); code != 0 {
		t.Fatalf("exit %d, final %+v", code, final)
	}
	return string(raw)
}

// TestRealGuestWatchdogPowersOff: the guest arms its i6300esb with busybox's watchdog (as KubeVirt's
// conformance spec 4641 does) and stops feeding it; the watchdog's poweroff ends the guest, and the
// launcher says so (the instance fails with WatchdogExpired, not as a qemu crash).
func TestRealGuestWatchdogPowersOff(t *testing.T) {
	p, serial := bootDemo(t, "watchdog", "#!/bin/sh\nwatchdog -t 1 -T 3 /dev/watchdog && sleep 1 && killall -9 watchdog\n", func(v *virtv1.VirtualMachineInstance) {
		v.Spec.Domain.Devices.Watchdog = &virtv1.Watchdog{Name: "wd", I6300ESB: &virtv1.I6300ESBWatchdog{Action: virtv1.WatchdogActionPoweroff}}
	})
	waitLog(t, 120*time.Second, serial, "user-data exited")
	code, final := p.waitExit(60 * time.Second)
	if code != launcher.ExitCrashed || final.Reason != launcherv1.ReasonWatchdog {
		raw, _ := os.ReadFile(serial)
		t.Fatalf("exit %d, final %+v; want %d with %s\n%s", code, final, launcher.ExitCrashed, launcherv1.ReasonWatchdog, raw)
	}
}

// bootDemo boots the demo disk in a new launcher for VMI ns/name with the user data (after mutate)
// and returns the launcher and the guest's serial log.
func bootDemo(t *testing.T, name, userData string, mutate func(*virtv1.VirtualMachineInstance)) (*pod, string) {
	t.Helper()
	p := startPod(t, name)
	v := vmi(name, 30)
	if _, err := diskcopy.Copy(filepath.Join(demoGuest(t), "demo.qcow2"), filepath.Join(p.private, launcherv1.DisksDir, "containerdisk")+"/"); err != nil {
		t.Fatal(err)
	}
	v.Spec.Domain.Devices.Disks = []virtv1.Disk{
		{Name: "containerdisk", BootOrder: ptr.To(uint(1)), Disk: &virtv1.DiskTarget{Bus: "virtio"}},
		{Name: "cloudinitdisk", Disk: &virtv1.DiskTarget{Bus: "virtio"}},
	}
	v.Spec.Volumes = []virtv1.Volume{
		{Name: "containerdisk", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "kubevirt/cirros-container-disk-demo:latest"}}},
		{Name: "cloudinitdisk", VolumeSource: virtv1.VolumeSource{CloudInitNoCloud: &virtv1.CloudInitNoCloudSource{UserData: userData}}},
	}
	mutate(v)
	p.sync(v)
	return p, filepath.Join(p.private, launcherv1.SerialLog)
}

// TestRealGuestPersistentTPM boots the demo guest twice with a persistent TPM on the same state
// volume: the second guest sees the TPM the first one had (the same endorsement key, printed by the
// demo guest's tpm-ek), and the state is on the volume.
func TestRealGuestPersistentTPM(t *testing.T) {
	makeStateDir(t, "tpm")
	ekLine := regexp.MustCompile(`tpm ek: ([0-9a-f]{32})`)
	ek := func() string {
		console := bootOnce(t, "tpm", "#!/bin/sh\ntpm-ek\n", func(v *virtv1.VirtualMachineInstance) {
			v.Spec.Domain.Devices.TPM = &virtv1.TPMDevice{Persistent: ptr.To(true)}
		})
		m := ekLine.FindStringSubmatch(console)
		if m == nil {
			t.Fatalf("the guest printed no endorsement key digest:\n%s", console)
		}
		return m[1]
	}
	first, second := ek(), ek()
	if first != second {
		t.Errorf("the TPM changed across restarts: endorsement key %s, then %s", first, second)
	}
	if _, err := os.Stat(filepath.Join(stateDir("tpm"), launcherv1.TPMStateSubdir, "tpm2", "tpm2-00.permall")); err != nil {
		t.Errorf("no TPM state on the persistent state volume: %v", err)
	}
}

// TestRealGuestPersistentEFIVariables boots the demo disk through OVMF twice with persistent EFI
// variables on the same state volume: a variable the first guest writes (the demo guest's
// efivar-mark, through efivarfs) is there for the second.
func TestRealGuestPersistentEFIVariables(t *testing.T) {
	makeStateDir(t, "efivars")
	efivar := func() string {
		console := bootOnce(t, "efivars", "#!/bin/sh\nefivar-mark\n", func(v *virtv1.VirtualMachineInstance) {
			v.Spec.Domain.Firmware.Bootloader = &virtv1.Bootloader{EFI: &virtv1.EFI{SecureBoot: ptr.To(false), Persistent: ptr.To(true)}}
			v.Spec.Domain.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("256Mi") // OVMF
		})
		m := regexp.MustCompile(`efivar: (\w+)`).FindStringSubmatch(console)
		if m == nil {
			t.Fatalf("the guest printed no efivar line:\n%s", console)
		}
		return m[1]
	}
	if first := efivar(); first != "written" {
		t.Fatalf("first boot: efivar %q, want written (a fresh variable store)", first)
	}
	if second := efivar(); second != "kept" {
		t.Errorf("second boot: efivar %q, want kept: the EFI variables did not persist", second)
	}
}

// reserveHugepages has the kernel set aside n more 2 MiB pages for the test, and gives them back after.
func reserveHugepages(t *testing.T, n int) {
	t.Helper()
	const knob = "/proc/sys/vm/nr_hugepages"
	raw, err := os.ReadFile(knob)
	if err != nil {
		t.Fatal(err)
	}
	before, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.WriteFile(knob, []byte(strconv.Itoa(before)), 0o644) })
	if err := os.WriteFile(knob, []byte(strconv.Itoa(before+n)), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := hugepageCounts(t)["HugePages_Total"]; got < before+n {
		t.Fatalf("the kernel set aside %d huge pages, want %d (memory too fragmented?)", got, before+n)
	}
}

// hugepageCounts are the HugePages_* lines of /proc/meminfo.
func hugepageCounts(t *testing.T) map[string]int {
	t.Helper()
	raw, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^(HugePages_\w+):\s+(\d+)$`).FindAllStringSubmatch(string(raw), -1) {
		counts[m[1]], _ = strconv.Atoi(m[2])
	}
	return counts
}

// TestRealGuestHugepages backs the demo guest's 64Mi with 2Mi huge pages from the pod's hugetlbfs:
// the guest boots, and its 32 pages are taken (or reserved) from the host's huge pages.
func TestRealGuestHugepages(t *testing.T) {
	guest := demoGuest(t)
	reserveHugepages(t, 40)
	p := startPod(t, "huge")
	v := vmi("huge", 0)
	if _, err := diskcopy.Copy(filepath.Join(guest, "demo.qcow2"), filepath.Join(p.private, launcherv1.DisksDir, "containerdisk")+"/"); err != nil {
		t.Fatal(err)
	}
	v.Spec.Domain.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("64Mi")
	v.Spec.Domain.Memory = &virtv1.Memory{Hugepages: &virtv1.Hugepages{PageSize: "2Mi"}}
	v.Spec.Domain.Devices.Disks = []virtv1.Disk{{Name: "containerdisk", Disk: &virtv1.DiskTarget{Bus: "virtio"}}}
	v.Spec.Volumes = []virtv1.Volume{{Name: "containerdisk", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "kubevirt/cirros-container-disk-demo:latest"}}}}
	inUse := func() int {
		c := hugepageCounts(t)
		return c["HugePages_Total"] - c["HugePages_Free"] + c["HugePages_Rsvd"]
	}
	before := inUse()
	p.sync(v)
	waitLog(t, 90*time.Second, filepath.Join(p.private, launcherv1.SerialLog), "booted")
	if used := inUse() - before; used < 32 {
		t.Errorf("the guest's memory is not in huge pages: %d pages taken or reserved, want 32 (%v)", used, hugepageCounts(t))
	}
}

// TestRealGuestSecureBootRefusesTheUnsignedDemoGuest asks for KubeVirt's default EFI (Secure Boot):
// libvirt picks OVMF with Microsoft's keys enrolled and SMM, and the firmware refuses to start the
// demo guest's unsigned bootloader.
func TestRealGuestSecureBootRefusesTheUnsignedDemoGuest(t *testing.T) {
	guest := demoGuest(t)
	p := startPod(t, "secureboot")
	v := vmi("secureboot", 0)
	if _, err := diskcopy.Copy(filepath.Join(guest, "demo.qcow2"), filepath.Join(p.private, launcherv1.DisksDir, "containerdisk")+"/"); err != nil {
		t.Fatal(err)
	}
	v.Spec.Domain.Firmware.Bootloader = &virtv1.Bootloader{EFI: &virtv1.EFI{}}
	v.Spec.Domain.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("256Mi")
	v.Spec.Domain.Devices.Disks = []virtv1.Disk{{Name: "containerdisk", Disk: &virtv1.DiskTarget{Bus: "virtio"}}}
	v.Spec.Volumes = []virtv1.Volume{{Name: "containerdisk", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "kubevirt/cirros-container-disk-demo:latest"}}}}
	p.sync(v)
	waitLog(t, 120*time.Second, filepath.Join(p.private, launcherv1.SerialLog), "Access Denied")
}

// TestRealGuestKernelBoot boots the demo kernel and initramfs by kernelBoot, as copied into the
// private dir by the kernel-boot disk container.
func TestRealGuestKernelBoot(t *testing.T) {
	guest := demoGuest(t)
	p := startPod(t, "kboot")
	v := vmi("kboot", 30)
	kb := filepath.Join(p.private, launcherv1.KernelBootDir)
	if _, err := diskcopy.Copy(filepath.Join(guest, "vmlinuz"), filepath.Join(kb, launcherv1.KernelBootKernel)); err != nil {
		t.Fatal(err)
	}
	if _, err := diskcopy.Copy(filepath.Join(guest, "initramfs.gz"), filepath.Join(kb, launcherv1.KernelBootInitrd)); err != nil {
		t.Fatal(err)
	}
	// The demo guest serves a page on port 80: forward it, masquerade-style, to the Pod's address.
	v.Spec.Domain.Devices.Interfaces = []virtv1.Interface{{Name: "default", Masquerade: &virtv1.InterfaceMasquerade{}, Ports: []virtv1.Port{{Name: "http", Port: 80}}}}
	v.Spec.Networks = []virtv1.Network{{Name: "default", NetworkSource: virtv1.NetworkSource{Pod: &virtv1.PodNetwork{}}}}
	v.Spec.Domain.Firmware.KernelBoot = &virtv1.KernelBoot{KernelArgs: "console=ttyS0", Container: &virtv1.KernelBootContainer{
		Image: "podvirt/demo-kernel:dev", KernelPath: "/boot/vmlinuz", InitrdPath: "/boot/initramfs.gz"}}
	t0 := time.Now()
	p.sync(v)
	serial := filepath.Join(p.private, launcherv1.SerialLog)
	waitLog(t, 90*time.Second, serial, "booted")
	t.Logf("sync → kernelBoot guest booted: %s", time.Since(t0).Round(time.Millisecond))
	// DHCP from slirp done means acpid and httpd run (they start before it).
	waitLog(t, 60*time.Second, serial, "eth0 10.0.2.15")
	// slirp accepts on the Pod's side at once and resets the connection while the guest's httpd is
	// not yet listening: ask until it answers, within a bound.
	var page string
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; {
		page, err = p.dialInPod("tcp", "127.0.0.1:80", "GET / HTTP/1.0\r\n\r\n")
		if (err == nil && strings.Contains(page, "200 OK")) || time.Now().After(deadline) {
			break
		}
		<-time.After(250 * time.Millisecond)
	}
	if err != nil || !strings.Contains(page, "200 OK") {
		t.Errorf("guest port 80 through the Pod's port 80 (for 30 s): %v %q", err, page)
	}
	t.Logf("guest web page through the forwarded port: %.60q", page)
	d := p.liveDomain()
	if d.OS.Kernel != filepath.Join(kb, "kernel") || d.OS.Initrd != filepath.Join(kb, "initrd") || d.OS.Cmdline != "console=ttyS0" {
		t.Errorf("os: kernel %q initrd %q cmdline %q", d.OS.Kernel, d.OS.Initrd, d.OS.Cmdline)
	}
	p.must(http.StatusAccepted, http.MethodPost, launcherv1.PathShutdown, launcherv1.ShutdownRequest{GracePeriodSeconds: 30})
	if code, final := p.waitExit(45 * time.Second); code != 0 || final.Reason != launcherv1.ReasonGuestShutdown {
		t.Fatalf("exit %d, final %+v", code, final)
	}
}

func smaps(t *testing.T, pid int) []qemumem.Mapping {
	t.Helper()
	maps, err := qemumem.ReadSmaps(pid)
	if err != nil {
		t.Fatal(err)
	}
	return maps
}

// podPIDs are the processes of the launcher Pod: PID 1 (the launcher's init), the launcher and qemu.
func podPIDs(t *testing.T, p *pod) (launcherPIDs []int, qemu int) {
	t.Helper()
	qemu = p.qemuPID()
	launcherPIDs = []int{p.launcherPID()}
	for _, pid := range childrenOf(launcherPIDs[0]) {
		if pid != qemu {
			launcherPIDs = append(launcherPIDs, pid)
		}
	}
	return launcherPIDs, qemu
}

// reportMemory splits the Pod's memory into guest RAM, the emulator's translation cache, qemu's own
// memory and the launcher's, and checks the per-VM overhead stays within 80 MiB. Anonymous memory is
// per VM; file-backed pages (binaries, libraries, firmware) are counted once per file, as the page
// cache holds them once (and shares them between all launcher Pods of a node using the same image).
func reportMemory(t *testing.T, p *pod, guestBytes int64) {
	t.Helper()
	launcherPIDs, qemu := podPIDs(t, p)
	files := map[string]int64{}
	countFiles := func(maps []qemumem.Mapping) {
		for _, m := range maps {
			if strings.HasPrefix(m.Path, "/") {
				files[m.Path] = max(files[m.Path], m.Files()/1024)
			}
		}
	}
	qemuMaps := smaps(t, qemu)
	countFiles(qemuMaps)
	q, err := qemumem.SplitQemu(qemuMaps, guestBytes)
	if err != nil {
		t.Fatal(err)
	}
	guestRAM, tcg, qemuAnon := q.GuestTouched/1024, q.TCG/1024, q.Own/1024
	var launcherAnon int64
	for _, pid := range launcherPIDs {
		maps := smaps(t, pid)
		countFiles(maps)
		for _, m := range maps {
			launcherAnon += m.Anon / 1024
		}
	}
	var fileKB int64
	for _, kb := range files {
		fileKB += kb
	}
	overhead := launcherAnon + qemuAnon + fileKB
	t.Logf("memory (KiB): guest RAM touched %d, TCG translation cache %d, qemu's own anonymous %d, launcher anonymous %d (%d processes), mapped files once %d",
		guestRAM, tcg, qemuAnon, launcherAnon, len(launcherPIDs), fileKB)
	t.Logf("per-VM overhead beyond guest RAM: %.1f MiB (launcher %.1f + qemu %.1f + files %.1f); TCG adds %.1f MiB",
		float64(overhead)/1024, float64(launcherAnon)/1024, float64(qemuAnon)/1024, float64(fileKB)/1024, float64(tcg)/1024)
	if overhead > 80*1024 {
		t.Errorf("per-VM overhead %.1f MiB exceeds the 80 MiB goal", float64(overhead)/1024)
	}
}

// TestRealGuestHyperVUnderEmulation boots the demo kernel with the Hyper-V enlightenments qemu
// offers without KVM, the KVM signature hidden and paravirtual spinlocks off: qemu takes them all.
func TestRealGuestHyperVUnderEmulation(t *testing.T) {
	guest := demoGuest(t)
	p := startPod(t, "hyperv")
	v := vmi("hyperv", 0)
	kb := filepath.Join(p.private, launcherv1.KernelBootDir)
	for src, dst := range map[string]string{"vmlinuz": launcherv1.KernelBootKernel, "initramfs.gz": launcherv1.KernelBootInitrd} {
		if _, err := diskcopy.Copy(filepath.Join(guest, src), filepath.Join(kb, dst)); err != nil {
			t.Fatal(err)
		}
	}
	v.Spec.Domain.Firmware.KernelBoot = &virtv1.KernelBoot{KernelArgs: "console=ttyS0", Container: &virtv1.KernelBootContainer{
		Image: "podvirt/demo-kernel:dev", KernelPath: "/boot/vmlinuz", InitrdPath: "/boot/initramfs.gz"}}
	on := &virtv1.FeatureState{}
	v.Spec.Domain.Features = &virtv1.Features{
		Hyperv: &virtv1.FeatureHyperv{Relaxed: on, VAPIC: on, Spinlocks: &virtv1.FeatureSpinlocks{}, Runtime: on, Reset: on, Frequencies: on,
			VendorID: &virtv1.FeatureVendorID{VendorID: "PodvirtHV"}},
		KVM:        &virtv1.FeatureKVM{Hidden: true},
		Pvspinlock: &virtv1.FeatureState{Enabled: new(bool)},
	}
	p.sync(v)
	waitLog(t, 90*time.Second, filepath.Join(p.private, launcherv1.SerialLog), "booted")
	if hv := p.liveDomain().Features.HyperV; hv == nil || hv.VendorId == nil || hv.VendorId.Value != "PodvirtHV" {
		t.Errorf("the running domain lacks the enlightenments: %+v", hv)
	}
}
