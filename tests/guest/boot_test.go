//go:build guestboot

package guest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// libvirtMemoryFor64M is what a VMI asking for 64M (64,000,000 bytes = 62,500 KiB) gets from libvirt 9.0's
// qemu driver here: the domain XML keeps 62500 KiB, but qemu is started with `-m 62` and a
// memory-backend-ram of 65011712 bytes, i.e. rounded up to whole MiB (measured with
// `virsh domxml-to-native qemu-argv`, see docs/guest-images.md).
const libvirtMemoryFor64M = "62M"

// seedUserData is the user-data of the seed's example VM (a NoCloud shell script).
const seedUserData = "#!/bin/sh\n\necho 'printed from cloud-init userdata'\n"

// guestBuild is the output of hack/guest/build.sh: the image files and the facts it recorded in guest.env.
type guestBuild struct {
	dir string
	env map[string]string
}

// buildGuest runs hack/guest/build.sh (cached: seconds when nothing changed) and reads its guest.env.
func buildGuest(t *testing.T) guestBuild {
	t.Helper()
	return runGuestBuild(t, "build.sh")
}

// runGuestBuild runs the guest build hack/guest/<script>, which prints its output directory last, and
// reads the guest.env there.
func runGuestBuild(t *testing.T, script string) guestBuild {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "hack", "guest", script))
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/guest/%s: %v\n%s", script, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	b := guestBuild{dir: lines[len(lines)-1], env: map[string]string{}}
	envFile, err := os.ReadFile(filepath.Join(b.dir, "guest.env"))
	if err != nil {
		t.Fatalf("read guest.env: %v", err)
	}
	for _, line := range strings.Split(string(envFile), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			b.env[k] = strings.Trim(v, `"`)
		}
	}
	return b
}

// seedFiles writes the NoCloud seed files into a fresh directory and returns their paths.
func seedFiles(t *testing.T, hostname string) []string {
	t.Helper()
	dir := t.TempDir()
	files := []struct{ name, content string }{
		{"user-data", seedUserData},
		{"meta-data", fmt.Sprintf("instance-id: %s\nlocal-hostname: %s\n", hostname, hostname)},
	}
	var paths []string
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, []byte(f.content), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	return paths
}

// seedISO writes a NoCloud seed as the launcher builds it: ISO9660 with volume id cidata.
func seedISO(t *testing.T, hostname string) string {
	t.Helper()
	iso := filepath.Join(t.TempDir(), "seed.iso")
	args := append([]string{"-quiet", "-output", iso, "-volid", "cidata", "-joliet", "-rock"}, seedFiles(t, hostname)...)
	if out, err := exec.Command("genisoimage", args...).CombinedOutput(); err != nil {
		t.Fatalf("genisoimage: %v\n%s", err, out)
	}
	return iso
}

// seedVFAT writes a NoCloud seed as a vfat filesystem labelled cidata (the other form NoCloud accepts).
func seedVFAT(t *testing.T, hostname string) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "seed.vfat")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 4<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.vfat", "-n", "cidata", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.vfat: %v\n%s", err, out)
	}
	args := append([]string{"-i", img}, seedFiles(t, hostname)...)
	if out, err := exec.Command("mcopy", append(args, "::/")...).CombinedOutput(); err != nil {
		t.Fatalf("mcopy: %v\n%s", err, out)
	}
	return img
}

// scratchDisk creates an empty raw disk the guest formats and writes (what a PVC test will do).
func scratchDisk(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scratch.raw")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 32<<20); err != nil {
		t.Fatal(err)
	}
	return path
}

// freePort returns a loopback TCP port that was free a moment ago, for qemu's hostfwd.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// virtioDisk returns qemu arguments attaching path as a virtio-blk disk with a serial number.
func virtioDisk(id, path, format, serial string, readonly bool) []string {
	drive := fmt.Sprintf("file=%s,format=%s,if=none,id=%s", path, format, id)
	if readonly {
		drive += ",readonly=on"
	}
	return []string{"-drive", drive, "-device", fmt.Sprintf("virtio-blk-pci,drive=%s,serial=%s", id, serial)}
}

// machineArgs are the qemu arguments shared by both boots: q35 under TCG (no KVM here), the memory
// libvirt gives a 64M VMI, user networking with the guest's port 80 forwarded to a loopback port.
func machineArgs(httpPort int) []string {
	return []string{"-machine", "q35", "-accel", "tcg,tb-size=32", "-cpu", "qemu64", "-smp", "1",
		"-m", libvirtMemoryFor64M,
		"-netdev", fmt.Sprintf("user,id=net0,hostfwd=tcp:127.0.0.1:%d-:80", httpPort),
		"-device", "virtio-net-pci,netdev=net0"}
}

var (
	bannerRE   = regexp.MustCompile(`Podvirt demo guest (\S+) booted`)
	userDataRE = regexp.MustCompile(`printed from cloud-init userdata`)
	addressRE  = regexp.MustCompile(`Podvirt demo guest: eth0 (\S+)`)
)

// exerciseGuest runs the whole scenario on a started VM: the boot path's own marks (bootloader banner,
// kernel command line), banner, user-data, DHCP, port 80, console shell writing the scratch disk,
// memory figures, ACPI power-off and a clean qemu exit.
func exerciseGuest(t *testing.T, v *vm, b guestBuild, hostname string, httpPort int, scratch string, bootMarks ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	off := 0
	var err error
	for _, mark := range bootMarks {
		if _, off, err = v.console.waitFor(ctx, regexp.MustCompile(regexp.QuoteMeta(mark)), off); err != nil {
			t.Fatal(err)
		}
	}
	m, off, err := v.console.waitFor(ctx, bannerRE, off)
	if err != nil {
		t.Fatal(err)
	}
	bootTime := time.Since(v.started)
	if m[1] != b.env["GUEST_RELEASE"] {
		t.Errorf("banner says release %q, build says %q", m[1], b.env["GUEST_RELEASE"])
	}
	if _, off, err = v.console.waitFor(ctx, userDataRE, off); err != nil {
		t.Fatal(err)
	}
	userDataTime := time.Since(v.started)
	m, _, err = v.console.waitFor(ctx, addressRE, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("guest address %s", m[1])
	checkHTTP(ctx, t, httpPort)

	prompt := regexp.MustCompile(regexp.QuoteMeta(hostname + "# "))
	if _, off, err = v.console.waitFor(ctx, prompt, off); err != nil {
		t.Fatalf("no console shell with the meta-data hostname: %v", err)
	}
	v.send(t, `grep -E 'MemTotal|MemAvailable' /proc/meminfo; echo mem-$((40+2))`)
	before := off
	if _, off, err = v.console.waitFor(ctx, regexp.MustCompile(`mem-42`), off); err != nil {
		t.Fatal(err)
	}
	var meminfo []string
	for _, m := range regexp.MustCompile(`(MemTotal|MemAvailable): +(\d+ kB)`).FindAllStringSubmatch(v.console.String()[before:off], -1) {
		meminfo = append(meminfo, m[1]+" "+m[2])
	}
	v.send(t, `for d in /sys/block/vd*; do [ "$(cat $d/serial)" = scratch ] && dev=/dev/${d##*/}; done; `+
		`mke2fs -q $dev && mount $dev /mnt && echo podvirt-scratch-data >/mnt/hello && umount /mnt && echo disk-$((40+2))`)
	if _, off, err = v.console.waitFor(ctx, regexp.MustCompile(`disk-42`), off); err != nil {
		t.Fatal(err)
	}
	rss, err := v.peakRSS()
	if err != nil {
		t.Fatal(err)
	}

	down := time.Now()
	if err := v.powerdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, off, err = v.console.waitFor(ctx, regexp.MustCompile(`ACPI power button, powering off`), off); err != nil {
		t.Fatal(err)
	}
	if _, _, err = v.console.waitFor(ctx, regexp.MustCompile(`reboot: Power down`), off); err != nil {
		t.Fatal(err)
	}
	if err := v.waitExit(ctx); err != nil {
		t.Fatalf("qemu did not exit cleanly after the ACPI power-off: %v", err)
	}
	t.Logf("memory -m %s; qemu start -> banner %.1fs, -> user-data output %.1fs; ACPI power-off -> qemu exit %.1fs; guest %s; qemu peak RSS %d MiB",
		libvirtMemoryFor64M, bootTime.Seconds(), userDataTime.Seconds(), time.Since(down).Seconds(), strings.Join(meminfo, ", "), rss/1024)
	checkScratch(t, scratch)
}

// checkHTTP fetches the guest's page through the forwarded port.
func checkHTTP(ctx context.Context, t *testing.T, port int) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", port), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("guest web page: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("Podvirt demo guest")) {
		t.Fatalf("guest web page: status %d, body %q", resp.StatusCode, body)
	}
}

// checkScratch verifies on the host that the guest left an ext2 filesystem holding its file.
func checkScratch(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	magic := make([]byte, 2)
	if _, err := f.ReadAt(magic, 1024+56); err != nil {
		t.Fatal(err)
	}
	if magic[0] != 0x53 || magic[1] != 0xef {
		t.Errorf("scratch disk has no ext2 superblock (magic % x)", magic)
	}
	found := false
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	s.Split(bufio.ScanWords)
	for s.Scan() {
		if bytes.Contains(s.Bytes(), []byte("podvirt-scratch-data")) {
			found = true
			break
		}
	}
	if !found {
		t.Errorf("scratch disk does not hold the file the guest wrote")
	}
}

// TestKernelBoot boots the kernelBoot pair (/boot/vmlinuz + /boot/initramfs.gz) by direct kernel boot
// with the documented kernelArgs, as KubeVirt's spec.domain.firmware.kernelBoot does, once with each
// form of NoCloud seed.
func TestKernelBoot(t *testing.T) {
	b := buildGuest(t)
	for _, seed := range []struct {
		name  string
		build func(*testing.T, string) string
	}{{"iso9660-seed", seedISO}, {"vfat-seed", seedVFAT}} {
		t.Run(seed.name, func(t *testing.T) {
			port := freePort(t)
			scratch := scratchDisk(t)
			args := machineArgs(port)
			args = append(args, "-kernel", filepath.Join(b.dir, "vmlinuz"), "-initrd", filepath.Join(b.dir, "initramfs.gz"),
				"-append", b.env["GUEST_KERNELBOOT_ARGS"], "-no-reboot")
			args = append(args, virtioDisk("seed", seed.build(t, "kernelboot-vm"), "raw", "cidata", true)...)
			args = append(args, virtioDisk("scratch", scratch, "raw", "scratch", false)...)
			exerciseGuest(t, startVM(t, args...), b, "kernelboot-vm", port, scratch,
				"Command line: "+b.env["GUEST_KERNELBOOT_ARGS"])
		})
	}
}

// TestContainerDisk boots the containerDisk's qcow2 through SeaBIOS and syslinux from a copy-on-write
// overlay (the image itself is never written), with a VGA device as KubeVirt attaches one.
func TestContainerDisk(t *testing.T) {
	b := buildGuest(t)
	overlay := filepath.Join(t.TempDir(), "overlay.qcow2")
	out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-b", filepath.Join(b.dir, "demo.qcow2"),
		"-F", "qcow2", overlay).CombinedOutput()
	if err != nil {
		t.Fatalf("qemu-img create overlay: %v\n%s", err, out)
	}
	port := freePort(t)
	scratch := scratchDisk(t)
	args := append(machineArgs(port), "-vga", "std", "-no-reboot")
	args = append(args, virtioDisk("boot", overlay, "qcow2", "containerdisk", false)...)
	args = append(args, virtioDisk("seed", seedISO(t, "containerdisk-vm"), "raw", "cidata", true)...)
	args = append(args, virtioDisk("scratch", scratch, "raw", "scratch", false)...)
	exerciseGuest(t, startVM(t, args...), b, "containerdisk-vm", port, scratch,
		"SYSLINUX 6.04", "Command line: BOOT_IMAGE=/vmlinuz "+b.env["GUEST_DISK_KERNEL_ARGS"])
}

// TestAlpineFlavour boots the Alpine-like containerDisk (alpine.qcow2, kernel argument
// podvirt.flavour=alpine) and logs in as KubeVirt's tests log in to Alpine: a "localhost login: "
// prompt, root without a password, the prompt "localhost:~# ", a console that answers stty and
// echo $?, and poweroff from the shell.
func TestAlpineFlavour(t *testing.T) {
	b := buildGuest(t)
	overlay := filepath.Join(t.TempDir(), "overlay.qcow2")
	out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-b", filepath.Join(b.dir, "alpine.qcow2"),
		"-F", "qcow2", overlay).CombinedOutput()
	if err != nil {
		t.Fatalf("qemu-img create overlay: %v\n%s", err, out)
	}
	v := startVM(t, append(append(machineArgs(freePort(t)), "-no-reboot"), virtioDisk("boot", overlay, "qcow2", "containerdisk", false)...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	off := 0
	for _, step := range []struct{ send, want string }{
		{"", `localhost login: `},
		{"root", `localhost:~# `},
		{"stty cols 500 rows 500; echo $?", `\n0\r?\n`},
		{"dmesg -n 1; echo flavour-$?", `flavour-0`},
	} {
		if step.send != "" {
			v.send(t, step.send)
		}
		if _, off, err = v.console.waitFor(ctx, regexp.MustCompile(step.want), off); err != nil {
			t.Fatalf("after %q: %v", step.send, err)
		}
	}
	v.send(t, "poweroff")
	if err := v.waitExit(ctx); err != nil {
		t.Fatalf("poweroff from the shell: %v", err)
	}
}
