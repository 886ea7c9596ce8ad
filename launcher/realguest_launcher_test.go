//go:build launcher

package launcher_test

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/launcher"
	"github.com/podvirt/podvirt/launcher/diskcopy"
	"github.com/podvirt/podvirt/launcherapi"
)

// demoGuest is the directory of the demo guest (busybox + small kernel) another part of the project
// builds under $PODVIRT_CACHE/guest/<key>/; the tests that need it are skipped when it is absent.
func demoGuest(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("PODVIRT_CACHE")
	if cache == "" {
		cache = "/var/cache/podvirt"
	}
	dirs, _ := filepath.Glob(filepath.Join(cache, "guest", "*", "demo.qcow2"))
	for _, d := range dirs {
		dir := filepath.Dir(d)
		if _, err := os.Stat(filepath.Join(dir, ".done")); err == nil {
			return dir
		}
	}
	t.Skipf("no demo guest under %s/guest (built by the guest image targets); skipping the real-OS boot", cache)
	return ""
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
	if _, err := diskcopy.Copy(src, filepath.Join(p.private, launcherapi.DisksDir, "containerdisk")+"/"); err != nil {
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
	serial := filepath.Join(p.private, launcherapi.SerialLog)
	waitLog(t, 90*time.Second, serial, "printed from cloud-init userdata")
	t.Logf("sync → cloud-init user data ran in the guest: %s", time.Since(t0).Round(time.Millisecond))
	waitLog(t, 30*time.Second, serial, "user-data exited")

	reportMemory(t, p, 65011712)

	t1 := time.Now()
	p.must(http.StatusAccepted, http.MethodPost, launcherapi.PathShutdown, launcherapi.ShutdownRequest{GracePeriodSeconds: 30})
	code, final := p.waitExit(45 * time.Second)
	t.Logf("ACPI shutdown of the demo guest → launcher exit: %s", time.Since(t1).Round(time.Millisecond))
	if code != 0 || final.Reason != launcher.ReasonGuestShutdown {
		t.Fatalf("exit %d, final %+v", code, final)
	}
}

// TestRealGuestKernelBoot boots the demo kernel and initramfs by kernelBoot, as copied into the
// private dir by the kernelBoot init container.
func TestRealGuestKernelBoot(t *testing.T) {
	guest := demoGuest(t)
	p := startPod(t, "kboot")
	v := vmi("kboot", 30)
	kb := filepath.Join(p.private, launcherapi.KernelBootDir)
	if _, err := diskcopy.Copy(filepath.Join(guest, "vmlinuz"), filepath.Join(kb, launcherapi.KernelBootKernel)); err != nil {
		t.Fatal(err)
	}
	if _, err := diskcopy.Copy(filepath.Join(guest, "initramfs.gz"), filepath.Join(kb, launcherapi.KernelBootInitrd)); err != nil {
		t.Fatal(err)
	}
	// The demo guest serves a page on port 80: forward it, masquerade-style, to the Pod's address.
	v.Spec.Domain.Devices.Interfaces = []virtv1.Interface{{Name: "default", Masquerade: &virtv1.InterfaceMasquerade{}, Ports: []virtv1.Port{{Name: "http", Port: 80}}}}
	v.Spec.Networks = []virtv1.Network{{Name: "default", NetworkSource: virtv1.NetworkSource{Pod: &virtv1.PodNetwork{}}}}
	v.Spec.Domain.Firmware.KernelBoot = &virtv1.KernelBoot{KernelArgs: "console=ttyS0", Container: &virtv1.KernelBootContainer{
		Image: "podvirt/demo-kernel:dev", KernelPath: "/boot/vmlinuz", InitrdPath: "/boot/initramfs.gz"}}
	t0 := time.Now()
	p.sync(v)
	serial := filepath.Join(p.private, launcherapi.SerialLog)
	waitLog(t, 90*time.Second, serial, "booted")
	t.Logf("sync → kernelBoot guest booted: %s", time.Since(t0).Round(time.Millisecond))
	// DHCP from slirp done means acpid and httpd run (they start before it).
	waitLog(t, 60*time.Second, serial, "eth0 10.0.2.15")
	page, err := p.dialInPod("tcp", "127.0.0.1:80", "GET / HTTP/1.0\r\n\r\n")
	if err != nil || !strings.Contains(page, "200 OK") {
		t.Errorf("guest port 80 through the Pod's port 80: %v %q", err, page)
	}
	t.Logf("guest web page through the forwarded port: %.60q", page)
	d := p.liveDomain()
	if d.OS.Kernel != filepath.Join(kb, "kernel") || d.OS.Initrd != filepath.Join(kb, "initrd") || d.OS.Cmdline != "console=ttyS0" {
		t.Errorf("os: kernel %q initrd %q cmdline %q", d.OS.Kernel, d.OS.Initrd, d.OS.Cmdline)
	}
	p.must(http.StatusAccepted, http.MethodPost, launcherapi.PathShutdown, launcherapi.ShutdownRequest{GracePeriodSeconds: 30})
	if code, final := p.waitExit(45 * time.Second); code != 0 || final.Reason != launcher.ReasonGuestShutdown {
		t.Fatalf("exit %d, final %+v", code, final)
	}
}

// mapping is one entry of /proc/PID/smaps.
type mapping struct {
	perms  string
	sizeKB int64
	rssKB  int64
	anonKB int64 // private anonymous pages (what the Pod's cgroup is charged for this process alone)
	path   string
}

func smaps(t *testing.T, pid int) []mapping {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && len(fields[1]) == 4:
			m := mapping{perms: fields[1]}
			if len(fields) > 5 {
				m.path = fields[5]
			}
			out = append(out, m)
		case len(out) == 0 || len(fields) < 2:
		case fields[0] == "Size:":
			out[len(out)-1].sizeKB, _ = strconv.ParseInt(fields[1], 10, 64)
		case fields[0] == "Rss:":
			out[len(out)-1].rssKB, _ = strconv.ParseInt(fields[1], 10, 64)
		case fields[0] == "Anonymous:":
			out[len(out)-1].anonKB, _ = strconv.ParseInt(fields[1], 10, 64)
		}
	}
	return out
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
	var guestRAM, tcg, qemuAnon, launcherAnon int64
	guestKB := guestBytes / 1024
	for _, m := range smaps(t, qemu) {
		switch {
		case m.path == "" && m.sizeKB >= guestKB && m.sizeKB <= guestKB+4096 && guestRAM == 0:
			guestRAM = m.anonKB // pc.ram: one anonymous mapping of the guest's size (+ alignment)
		case m.perms == "rwxp":
			tcg += m.anonKB // TCG's code_gen_buffer: the only writable+executable memory
		default:
			qemuAnon += m.anonKB
		}
		if strings.HasPrefix(m.path, "/") {
			files[m.path] = max(files[m.path], m.rssKB-m.anonKB)
		}
	}
	for _, pid := range launcherPIDs {
		for _, m := range smaps(t, pid) {
			launcherAnon += m.anonKB
			if strings.HasPrefix(m.path, "/") {
				files[m.path] = max(files[m.path], m.rssKB-m.anonKB)
			}
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
	if guestRAM == 0 {
		t.Errorf("no guest RAM mapping of %d KiB found in qemu's smaps", guestKB)
	}
	if overhead > 80*1024 {
		t.Errorf("per-VM overhead %.1f MiB exceeds the 80 MiB goal", float64(overhead)/1024)
	}
}
