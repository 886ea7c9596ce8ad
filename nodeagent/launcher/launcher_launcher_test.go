//go:build launcher

package launcher_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/nodeagent/launcher"
	"github.com/podvirt/podvirt/nodeagent/launcher/diskcopy"
)

const bootMarker = "PODVIRT-BOOT-SECTOR-OK"

// vmi is a VMI for the launcher named ns/name, 64M (the seed example's size), emulated.
func vmi(name string, grace int64) *virtv1.VirtualMachineInstance {
	return &virtv1.VirtualMachineInstance{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "uid-" + "0001"},
		Spec: virtv1.VirtualMachineInstanceSpec{
			TerminationGracePeriodSeconds: &grace,
			Domain: virtv1.DomainSpec{
				Firmware:  &virtv1.Firmware{UUID: "0d2a2043-41c0-59c3-9b17-025022203668", Serial: "S-1"},
				Resources: virtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64M")}},
			},
		},
	}
}

// withBootSector adds the 512-byte test guest as a containerDisk, copied the way the disk container
// does it (container-disk copy SRC DIR/), as a qcow2 image.
func withBootSector(t *testing.T, p *pod, v *virtv1.VirtualMachineInstance) string {
	t.Helper()
	raw := filepath.Join(t.TempDir(), "boot.raw")
	sector, err := os.ReadFile("testdata/bootsector.bin")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(raw, append(sector, make([]byte, 1<<20-len(sector))...), 0o644); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(disk, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("qemu-img", "convert", "-O", "qcow2", raw, filepath.Join(disk, "boot.qcow2")).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v %s", err, out)
	}
	copied, err := diskcopy.Copy(disk, filepath.Join(p.private, launcherv1.DisksDir, "containerdisk")+"/")
	if err != nil {
		t.Fatal(err)
	}
	v.Spec.Domain.Devices.Disks = append(v.Spec.Domain.Devices.Disks, virtv1.Disk{Name: "containerdisk", Disk: &virtv1.DiskTarget{Bus: "virtio"}})
	v.Spec.Volumes = append(v.Spec.Volumes, virtv1.Volume{Name: "containerdisk",
		VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "test/bootsector:dev"}}})
	return copied
}

func sha(t *testing.T, path string) [32]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(data)
}

// TestLifecycle runs the whole protocol against a real guest: refusals before sync, sync → Running,
// the domain libvirt accepted, serial log and console-log container, VNC, port forward, pause/unpause,
// ACPI shutdown → exit 0.
func TestLifecycle(t *testing.T) {
	p := startPod(t, "life")
	v := vmi("life", 30)
	image := withBootSector(t, p, v)
	before := sha(t, image)
	v.Spec.Domain.Devices.Disks = append(v.Spec.Domain.Devices.Disks,
		virtv1.Disk{Name: "seed", Disk: &virtv1.DiskTarget{}}, virtv1.Disk{Name: "scratch", Disk: &virtv1.DiskTarget{Bus: "sata"}})
	v.Spec.Volumes = append(v.Spec.Volumes,
		virtv1.Volume{Name: "seed", VolumeSource: virtv1.VolumeSource{CloudInitNoCloud: &virtv1.CloudInitNoCloudSource{UserData: "#!/bin/sh\necho hi\n"}}},
		virtv1.Volume{Name: "scratch", VolumeSource: virtv1.VolumeSource{EmptyDisk: &virtv1.EmptyDiskSource{Capacity: resource.MustParse("1Gi")}}})
	v.Spec.Domain.Devices.Interfaces = []virtv1.Interface{{Name: "default", Masquerade: &virtv1.InterfaceMasquerade{}, Ports: []virtv1.Port{{Port: 18080}}}}
	v.Spec.Networks = []virtv1.Network{{Name: "default", NetworkSource: virtv1.NetworkSource{Pod: &virtv1.PodNetwork{}}}}

	console := startConsoleLog(t, p)
	checkRefusals(t, p, v)

	t0 := time.Now()
	st := p.sync(v)
	t.Logf("sync → Running: %s (%s)", time.Since(t0).Round(time.Millisecond), st.Message)
	if st.State != launcherv1.DomainRunning || !st.Emulation || st.QemuPID == 0 {
		t.Fatalf("status after sync = %+v", st)
	}
	if !strings.Contains(st.Message, "asked 64000000 bytes, qemu got 65011712 bytes") {
		t.Errorf("memory report = %q", st.Message)
	}
	if len(st.Interfaces) != 1 || st.Interfaces[0].Name != "default" || !strings.HasPrefix(st.Interfaces[0].MAC, "52:54:00:") {
		t.Errorf("interfaces = %+v", st.Interfaces)
	}
	if again := p.sync(v); again.State != launcherv1.DomainRunning {
		t.Fatalf("second sync = %+v", again)
	}
	waitLog(t, 30*time.Second, filepath.Join(p.private, launcherv1.SerialLog), bootMarker)
	t.Logf("sync → guest output on the serial log: %s", time.Since(t0).Round(time.Millisecond))

	checkLiveDomain(t, p)
	checkDisks(t, p, image)
	checkVNC(t, p)
	if _, err := p.dialInPod("tcp", "127.0.0.1:18080", ""); err != nil {
		t.Errorf("forwarded port 18080 is not reachable in the Pod: %v", err)
	}

	if st := p.must(http.StatusOK, http.MethodPost, launcherv1.PathPause, nil); st.State != launcherv1.DomainPaused {
		t.Fatalf("after pause: %+v", st)
	}
	if st := p.status(); st.State != launcherv1.DomainPaused {
		t.Fatalf("status while paused: %+v", st)
	}
	if st := p.must(http.StatusOK, http.MethodPost, launcherv1.PathUnpause, nil); st.State != launcherv1.DomainRunning {
		t.Fatalf("after unpause: %+v", st)
	}

	t1 := time.Now()
	if st := p.must(http.StatusAccepted, http.MethodPost, launcherv1.PathShutdown, launcherv1.ShutdownRequest{GracePeriodSeconds: 30}); st.State != launcherv1.DomainShuttingDown && st.State != launcherv1.DomainShutoff {
		t.Fatalf("after shutdown: %+v", st)
	}
	code, final := p.waitExit(30 * time.Second)
	t.Logf("ACPI shutdown → launcher exit: %s", time.Since(t1).Round(time.Millisecond))
	if code != launcher.ExitShutoff || final.State != launcherv1.DomainShutoff || final.Reason != launcherv1.ReasonGuestShutdown {
		t.Fatalf("exit %d, final %+v; want 0 after the guest powered off", code, final)
	}
	if sha(t, image) != before {
		t.Error("the containerDisk image was modified")
	}
	select {
	case <-console.exited:
		if console.err != nil {
			t.Fatalf("console-log: %v", console.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("console-log did not end after the launcher")
	}
	if !strings.Contains(console.out.String(), bootMarker) {
		t.Fatalf("console-log printed %q", console.out.String())
	}
}

// checkLiveDomain checks what libvirt accepted and runs.
func checkLiveDomain(t *testing.T, p *pod) {
	t.Helper()
	d := p.liveDomain()
	if d.Type != "qemu" || d.Memory == nil || d.Memory.Value != 63488 || d.Memory.Unit != "KiB" {
		t.Errorf("domain type %q memory %+v: want qemu, 63488 KiB (64000000 bytes rounded up to whole MiB)", d.Type, d.Memory)
	}
	if tcg := d.Features.TCG; tcg == nil || tcg.TBCache == nil || !(tcg.TBCache.Size == 32 && tcg.TBCache.Unit == "MiB" ||
		tcg.TBCache.Size == 32768 && tcg.TBCache.Unit == "KiB") {
		t.Errorf("tcg tb-cache not 32 MiB: %+v", tcg)
	}
	if d.UUID != "0d2a2043-41c0-59c3-9b17-025022203668" {
		t.Errorf("uuid %s", d.UUID)
	}
	if len(d.Devices.Serials) != 1 || d.Devices.Serials[0].Log == nil ||
		d.Devices.Serials[0].Log.File != filepath.Join(p.private, launcherv1.SerialLog) {
		t.Errorf("serial: %+v", d.Devices.Serials)
	}
	if len(d.Devices.Interfaces) != 1 || d.Devices.Interfaces[0].Source == nil || d.Devices.Interfaces[0].Source.User == nil {
		t.Errorf("interfaces: %+v", d.Devices.Interfaces)
	}
	if len(d.Devices.Disks) != 3 || d.Devices.Disks[0].Target.Dev != "vda" || d.Devices.Disks[1].ReadOnly == nil || d.Devices.Disks[2].Target.Bus != "sata" {
		t.Errorf("disks: %+v", d.Devices.Disks)
	}
}

// checkDisks checks the overlay sits on the copied image and the emptyDisk is sparse.
func checkDisks(t *testing.T, p *pod, image string) {
	t.Helper()
	overlay := filepath.Join(p.private, "overlays", "containerdisk.qcow2")
	out, err := exec.Command("qemu-img", "info", "-U", "--output=json", overlay).Output()
	if err != nil {
		t.Fatalf("qemu-img info: %v", err)
	}
	var info struct {
		Format  string `json:"format"`
		Backing string `json:"backing-filename"`
		BFormat string `json:"backing-filename-format"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatal(err)
	}
	if info.Format != "qcow2" || info.Backing != image || info.BFormat != "qcow2" {
		t.Errorf("overlay %+v, want qcow2 on %s", info, image)
	}
	var st syscall.Stat_t
	empty := filepath.Join(p.private, "emptydisks", "scratch.img")
	if err := syscall.Stat(empty, &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 1<<30 || st.Blocks*512 > 1<<20 {
		t.Errorf("emptyDisk size %d allocated %d: want a sparse 1 GiB file", st.Size, st.Blocks*512)
	}
}

// checkVNC reads the RFB greeting from the VNC socket.
func checkVNC(t *testing.T, p *pod) {
	t.Helper()
	c, err := net.DialTimeout("unix", filepath.Join(p.private, launcherv1.VNCSocket), 5*time.Second)
	if err != nil {
		t.Fatalf("vnc socket: %v", err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	greeting := make([]byte, 12)
	if _, err := io.ReadFull(c, greeting); err != nil || string(greeting) != "RFB 003.008\n" {
		t.Errorf("vnc greeting %q, %v", greeting, err)
	}
}

// TestKill: /v1/kill stops the guest at once and the launcher exits non-zero (VMI Failed).
func TestKill(t *testing.T) {
	p := startPod(t, "kill")
	v := vmi("kill", 30)
	withBootSector(t, p, v)
	p.sync(v)
	waitLog(t, 30*time.Second, filepath.Join(p.private, launcherv1.SerialLog), bootMarker)
	p.must(http.StatusAccepted, http.MethodPost, launcherv1.PathKill, nil)
	code, final := p.waitExit(30 * time.Second)
	if code != launcher.ExitKilled || final.State != launcherv1.DomainCrashed || final.Reason != launcherv1.ReasonKilled {
		t.Fatalf("exit %d, final %+v; want %d, Crashed/Killed", code, final, launcher.ExitKilled)
	}
}

// TestFencing: a launcher whose node agent falls silent destroys the running guest itself after
// --fence-after, so that the VM, started elsewhere once the node counts as lost, never runs twice;
// requests keep it alive until then. Only the agent (root) vouches: a process of the launcher's own
// user asking for the status all along does not keep the guest alive.
func TestFencing(t *testing.T) {
	p := startPod(t, "fence", "--fence-after", "3s")
	v := vmi("fence", 30)
	withBootSector(t, p, v)
	p.sync(v)
	poll := time.NewTicker(time.Second) // an agent polling every second, for longer than the limit
	defer poll.Stop()
	for range 5 {
		<-poll.C
		if st := p.status(); st.State != launcherv1.DomainRunning {
			t.Fatalf("status while the agent polls: %+v", st)
		}
	}
	silent := time.Now()
	ctx, stopImpostor := context.WithCancel(context.Background())
	impostor := make(chan int, 1)
	go func() { // what any process in the launcher Pod could do: poll the socket as uid 107
		n := 0
		defer func() { impostor <- n }()
		for ctx.Err() == nil {
			out, err := exec.CommandContext(ctx, "setpriv", "--reuid", strconv.Itoa(podUID), "--regid", strconv.Itoa(podUID), "--clear-groups",
				"curl", "-sf", "--unix-socket", filepath.Join(p.private, launcherv1.CommandSocket), "http://launcher"+launcherv1.PathStatus).Output()
			if err == nil && strings.Contains(string(out), `"state"`) {
				n++
			}
			select {
			case <-ctx.Done():
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	code, final := p.waitExit(30 * time.Second)
	stopImpostor()
	if n := <-impostor; n == 0 {
		t.Error("the impostor's status requests never reached the launcher: the test proves nothing")
	}
	if took := time.Since(silent); took < 3*time.Second {
		t.Errorf("fenced %s after the last request, before the 3 s limit", took)
	}
	if code != launcher.ExitCrashed || final.State != launcherv1.DomainCrashed || final.Reason != launcherv1.ReasonFenced ||
		!strings.Contains(final.Message, "node agent was silent for more than 3s") {
		t.Fatalf("exit %d, final %+v; want %d, Crashed/Fenced naming the limit", code, final, launcher.ExitCrashed)
	}
}

// TestGracePeriodExpires: a guest that ignores the power button (no OS: SeaBIOS finds nothing to boot)
// is stopped when the grace period ends; a requested shutdown still ends with exit 0. No VNC when
// autoattachGraphicsDevice is false.
func TestGracePeriodExpires(t *testing.T) {
	p := startPod(t, "grace")
	v := vmi("grace", 30)
	off := false
	v.Spec.Domain.Devices.AutoattachGraphicsDevice = &off
	p.sync(v)
	if _, err := os.Stat(filepath.Join(p.private, launcherv1.VNCSocket)); err == nil {
		t.Error("vnc.sock exists although autoattachGraphicsDevice is false")
	}
	t0 := time.Now()
	p.must(http.StatusAccepted, http.MethodPost, launcherv1.PathShutdown, launcherv1.ShutdownRequest{GracePeriodSeconds: 2})
	if st := p.status(); st.State != launcherv1.DomainShuttingDown {
		t.Fatalf("status during the grace period: %+v", st)
	}
	code, final := p.waitExit(30 * time.Second)
	if took := time.Since(t0); took < 2*time.Second {
		t.Errorf("stopped after %s, before the 2 s grace period", took)
	}
	if code != launcher.ExitShutoff || final.Reason != launcherv1.ReasonGracePeriodExpired {
		t.Fatalf("exit %d, final %+v; want 0, GracePeriodExpired", code, final)
	}
}

// TestQemuCrash: qemu dying under the launcher ends it with a crash exit code (VMI Failed).
func TestQemuCrash(t *testing.T) {
	p := startPod(t, "crash")
	v := vmi("crash", 30)
	withBootSector(t, p, v)
	p.sync(v)
	if err := syscall.Kill(p.qemuPID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	code, final := p.waitExit(30 * time.Second)
	if code != launcher.ExitCrashed || final.State != launcherv1.DomainCrashed || final.Reason != launcherv1.ReasonQemuCrashed {
		t.Fatalf("exit %d, final %+v; want %d, Crashed/QemuCrashed", code, final, launcher.ExitCrashed)
	}
}

// TestSIGTERM: SIGTERM to the compute container shuts the guest down gracefully; unrequested (a
// liveness probe failed, the Pod was deleted) it ends the instance as Terminated, a failure.
func TestSIGTERM(t *testing.T) {
	for _, tc := range []struct {
		name      string
		requested bool // the node agent asked for the shutdown first (the instance is being deleted)
		code      int
		reason    string
	}{
		{"unrequested", false, launcher.ExitCrashed, launcherv1.ReasonTerminated},
		{"after a shutdown request", true, launcher.ExitShutoff, launcherv1.ReasonGuestShutdown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startPod(t, "term")
			v := vmi("term", 30)
			withBootSector(t, p, v)
			p.sync(v)
			waitLog(t, 30*time.Second, filepath.Join(p.private, launcherv1.SerialLog), bootMarker)
			if tc.requested {
				p.must(http.StatusAccepted, http.MethodPost, launcherv1.PathShutdown, launcherv1.ShutdownRequest{GracePeriodSeconds: 30})
			}
			if err := syscall.Kill(p.launcherPID(), syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
				t.Fatal(err)
			}
			code, final := p.waitExit(30 * time.Second)
			if code != tc.code || final.Reason != tc.reason {
				t.Fatalf("exit %d, final %+v; want exit %d, reason %s", code, final, tc.code, tc.reason)
			}
			if !tc.requested && !strings.Contains(final.Message, "it powered off") {
				t.Errorf("message %q: want how the guest ended", final.Message)
			}
		})
	}
}

// TestTerminateBeforeSync: a launcher told to stop before any guest exits 0 at once.
func TestTerminateBeforeSync(t *testing.T) {
	p := startPod(t, "idle")
	if err := syscall.Kill(p.launcherPID(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, _ := p.waitExit(10 * time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// consoleLog is a running `virt-launcher console-log`, the guest-console-log container.
type consoleLog struct {
	out    bytes.Buffer
	exited chan struct{} // closed when it has exited; err is set then
	err    error
}

// startConsoleLog starts the guest-console-log container's command on p's private dir.
func startConsoleLog(t *testing.T, p *pod) *consoleLog {
	t.Helper()
	c := &consoleLog{exited: make(chan struct{})}
	cmd := exec.Command(shared.bin, "console-log", "--private-dir", p.private, "--interval", "50ms")
	cmd.Stdout = &c.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			_ = cmd.Process.Kill()
			<-c.exited
		}
	})
	return c
}

// checkRefusals checks what the launcher refuses before a guest runs: status is empty, pause is 409,
// a bridge interface and a VMI for another name are 400 naming the problem.
func checkRefusals(t *testing.T, p *pod, v *virtv1.VirtualMachineInstance) {
	t.Helper()
	if st := p.status(); st.State != launcherv1.DomainNone {
		t.Fatalf("status before sync = %+v", st)
	}
	p.must(http.StatusConflict, http.MethodPost, launcherv1.PathPause, nil)
	bad := v.DeepCopy()
	bad.Spec.Domain.Devices.Interfaces[0].Masquerade, bad.Spec.Domain.Devices.Interfaces[0].Bridge = nil, &virtv1.InterfaceBridge{}
	data, _ := json.Marshal(bad)
	if code, out := p.call(http.MethodPost, launcherv1.PathSync, launcherv1.SyncRequest{VMI: data, Emulation: true}); code != http.StatusBadRequest ||
		!strings.Contains(string(out), "spec.domain.devices.interfaces[0].bridge") {
		t.Fatalf("sync with a bridge interface: %d %s", code, out)
	}
	other := v.DeepCopy()
	other.Name = "someone-else"
	data, _ = json.Marshal(other)
	if code, out := p.call(http.MethodPost, launcherv1.PathSync, launcherv1.SyncRequest{VMI: data}); code != http.StatusBadRequest {
		t.Fatalf("sync for another VMI: %d %s", code, out)
	}
}
