//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	itv1beta1 "github.com/podvirt/podvirt/api/instancetype/v1beta1"
	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/controllers/podtemplate"
	"github.com/podvirt/podvirt/tests/framework"
)

// The user data reports what the guest sees of the devices and clock its VM asks for.
const featuresUserData = `#!/bin/sh
echo "rng: $(cat /sys/class/misc/hw_random/rng_current)"
echo "balloon: $(ls /sys/bus/virtio/drivers/virtio_balloon/ | grep -c virtio)"
echo "pci: $(cat /sys/bus/pci/devices/*/device | tr '\n' ' ')"
echo "epoch: $(date +%s)"
echo "tpm: $(cat /sys/class/tpm/tpm0/tpm_version_major)"
echo "cpu flags: $(grep -m1 ^flags /proc/cpuinfo | cut -d: -f2) ."
`

// KubeVirt fields Podvirt implements reach a real guest: virtio-rng is the guest's hardware RNG, the
// balloon and the i6300esb watchdog are on its buses, it has a TPM 2.0 (swtpm), its CPU has the
// features asked for (aes on, SSE3 off), and its clock runs an hour ahead of UTC.
func TestKubeVirtDevicesAndClockInTheGuest(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	vm := demoVM(f.Namespace, "devices", virtv1.RunStrategyAlways, 0, featuresUserData)
	spec := &vm.Spec.Template.Spec
	spec.Domain.Devices.Rng = &virtv1.Rng{}
	spec.Domain.Devices.AutoattachMemBalloon = ptr.To(true)
	spec.Domain.Devices.Watchdog = &virtv1.Watchdog{Name: "wd", I6300ESB: &virtv1.I6300ESBWatchdog{Action: virtv1.WatchdogActionPoweroff}}
	spec.Domain.Devices.TPM = &virtv1.TPMDevice{}
	spec.Domain.CPU = &virtv1.CPU{Features: []virtv1.CPUFeature{{Name: "aes"}, {Name: "pni", Policy: "disable"}}}
	spec.Domain.Clock = &virtv1.Clock{ClockOffset: virtv1.ClockOffset{UTC: &virtv1.ClockOffsetUTC{OffsetSeconds: ptr.To(3600)}}}
	f.Create(vm)
	vmi := waitRunning(t, f, "devices", "")
	consoleContains(t, f, vmi, "user-data exited with status 0")
	console := f.PodLogs(vmi.Status.LauncherPod, "guest-console-log")
	now := time.Now().Unix()

	if !strings.Contains(console, "rng: virtio_rng") {
		t.Errorf("the guest's hardware RNG is not virtio-rng; console:\n%s", tail(console, 20))
	}
	if !strings.Contains(console, "balloon: 1") {
		t.Errorf("no virtio balloon in the guest; console:\n%s", tail(console, 20))
	}
	if m := regexp.MustCompile(`pci: (.*)`).FindStringSubmatch(console); m == nil || !strings.Contains(m[1], "0x25ab") {
		t.Errorf("no i6300esb (8086:25ab) on the guest's PCI bus; console:\n%s", tail(console, 20))
	}
	if m := regexp.MustCompile(`cpu flags: (.*)`).FindStringSubmatch(console); m == nil || !strings.Contains(m[1], " aes ") || strings.Contains(m[1], " pni ") {
		t.Errorf("the guest CPU should have aes and not pni (SSE3); console:\n%s", tail(console, 20))
	}
	if !strings.Contains(console, "tpm: 2") {
		t.Errorf("the guest has no TPM 2.0; console:\n%s", tail(console, 20))
	}
	m := regexp.MustCompile(`epoch: (\d+)`).FindStringSubmatch(console)
	if m == nil {
		t.Fatalf("the guest printed no epoch; console:\n%s", tail(console, 20))
	}
	guest, _ := strconv.ParseInt(m[1], 10, 64)
	// The guest printed its clock within the last few minutes; it must be an hour ahead.
	if ahead := guest - now; ahead < 3600-300 || ahead > 3600+60 {
		t.Errorf("guest clock is %d s ahead of UTC, want about 3600", ahead)
	}
}

// A VM asking for a GPU no node offers, or for huge pages where the node has none, is stored and
// says, naming the resource, why it does not run; a VM asking for a field Podvirt does not run is
// refused naming the field.
func TestGPUUnschedulableAndRefusedFieldsNamed(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	const gpu = "nvidia.com/GA102GL_A10"
	vm := demoVM(f.Namespace, "gpu", virtv1.RunStrategyAlways, 0, "")
	vm.Spec.Template.Spec.Domain.Devices.GPUs = []virtv1.GPU{{Name: "gpu1", DeviceName: gpu}}
	f.Create(vm)
	huge := demoVM(f.Namespace, "huge", virtv1.RunStrategyAlways, 0, "")
	huge.Spec.Template.Spec.Domain.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("64Mi")
	huge.Spec.Template.Spec.Domain.Memory = &virtv1.Memory{Hugepages: &virtv1.Hugepages{PageSize: "2Mi"}}
	f.Create(huge)
	for name, res := range map[string]string{"gpu": gpu, "huge": "hugepages-2Mi"} {
		f.Eventually("VM "+name+" says it is unschedulable, naming "+res, 2*time.Minute, func(ctx context.Context) (bool, error) {
			cur := &virtv1.VirtualMachine{}
			if err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: name}, cur); err != nil {
				return false, err
			}
			msg := ""
			for _, c := range cur.Status.Conditions {
				msg += c.Message + " "
			}
			return cur.Status.PrintableStatus == virtv1.VirtualMachineStatusUnschedulable && strings.Contains(msg, res),
				fmt.Errorf("status %s, conditions %q", cur.Status.PrintableStatus, msg)
		})
	}

	sound := demoVM(f.Namespace, "sound", virtv1.RunStrategyHalted, 0, "")
	sound.Spec.Template.Spec.Domain.Devices.Sound = &virtv1.SoundDevice{Name: "audio"}
	err := f.Client.Create(f.Context(), sound)
	const want = "spec.template.spec.domain.devices.sound: Forbidden: not supported by Podvirt"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a VM with a sound card: want %q, got %v", want, err)
	}
	if err := f.Client.Get(f.Context(), client.ObjectKeyFromObject(sound), &virtv1.VirtualMachine{}); err == nil {
		t.Errorf("the refused VM was stored")
	}
}

// A VM with a persistent TPM and persistent EFI variables (booting its disk through OVMF) keeps
// both across a stop and start: the same TPM (its endorsement key) and a variable the first guest
// wrote, on a claim the VM owns.
func TestPersistentTPMAndEFIVariablesAcrossStopStart(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	const name = "tpm"
	vm := demoVM(f.Namespace, name, virtv1.RunStrategyAlways, 30, "#!/bin/sh\ntpm-ek\nefivar-mark\n")
	spec := &vm.Spec.Template.Spec
	spec.Domain.Devices.TPM = &virtv1.TPMDevice{Persistent: ptr.To(true)}
	spec.Domain.Firmware = &virtv1.Firmware{Bootloader: &virtv1.Bootloader{EFI: &virtv1.EFI{SecureBoot: ptr.To(false), Persistent: ptr.To(true)}}}
	spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")} // OVMF
	spec.Domain.Devices.Disks = append([]virtv1.Disk{{Name: "root", BootOrder: ptr.To(uint(1)), Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}}}, spec.Domain.Devices.Disks...)
	spec.Volumes = append([]virtv1.Volume{{Name: "root", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: framework.Image("demo-containerdisk")}}}}, spec.Volumes...)
	f.Create(vm)
	state := regexp.MustCompile(`tpm ek: ([0-9a-f]{32})(?s:.*)efivar: (\w+)`)
	boot := func(vmi *virtv1.VirtualMachineInstance) (ek, efivar string) {
		consoleContains(t, f, vmi, "efivar: ")
		logs := f.PodLogs(vmi.Status.LauncherPod, launcherv1.ConsoleLogContainer)
		m := state.FindStringSubmatch(logs)
		if m == nil {
			t.Fatalf("the guest printed no endorsement key digest and EFI variable; console:\n%s", tail(logs, 15))
		}
		return m[1], m[2]
	}
	first := waitRunning(t, f, name, "")
	ek1, efivar1 := boot(first)
	setRunStrategy(t, f, name, virtv1.RunStrategyHalted)
	waitGone(t, f, name, 2*time.Minute)
	setRunStrategy(t, f, name, virtv1.RunStrategyAlways)
	ek2, efivar2 := boot(waitRunning(t, f, name, string(first.UID)))
	if ek2 != ek1 {
		t.Errorf("the TPM changed across stop/start: endorsement key %s, then %s", ek1, ek2)
	}
	if efivar1 != "written" || efivar2 != "kept" {
		t.Errorf("EFI variable: %q then %q, want written then kept", efivar1, efivar2)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := f.Client.Get(f.Context(), client.ObjectKey{Namespace: f.Namespace, Name: podtemplate.PersistentStateClaim(first)}, pvc); err != nil {
		t.Fatalf("the persistent state claim: %v", err)
	}
	if owner := metav1.GetControllerOf(pvc); owner == nil || owner.Kind != "VirtualMachine" || owner.Name != name {
		t.Errorf("the persistent state claim is owned by %+v, want the VM", owner)
	}
}

// A readiness probe reaches the guest through its launcher Pod: a probe of a web server the guest
// starts on a port the VM does not declare (forwarded for the probe) makes the instance and the VM
// Ready (`virtctl start --wait --for ready` returns then); a probe of a port nothing listens on
// leaves a running guest not Ready, saying why (and --for ready times out, exit 124).
func TestReadinessProbeReachesTheGuest(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	ok := demoVM(f.Namespace, "probe-ok", virtv1.RunStrategyHalted, 0, "#!/bin/sh\nhttpd -p 8080 -h /var/www\n")
	ok.Spec.Template.Spec.ReadinessProbe = &virtv1.Probe{PeriodSeconds: 2,
		ProbeHandler: virtv1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}}
	bad := demoVM(f.Namespace, "probe-bad", virtv1.RunStrategyHalted, 0, "")
	bad.Spec.Template.Spec.ReadinessProbe = &virtv1.Probe{PeriodSeconds: 2,
		ProbeHandler: virtv1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8081)}}}
	f.Create(ok)
	f.Create(bad)
	// A CI script waits for the guest itself: start --wait --for ready returns once the probe passes.
	if out, code := virtctl(t, f, "", "start", "probe-ok", "--wait", "--for", "ready", "--timeout", bootTimeout.String()); code != 0 || !strings.Contains(out, "instance Running, Ready") {
		t.Fatalf("start --wait --for ready: exit %d, output:\n%s", code, out)
	}
	if out, code := virtctl(t, f, "", "start", "probe-bad", "--wait", "--for", "ready", "--timeout", "30s"); code != 124 || !strings.Contains(out, "not ready: ") {
		t.Errorf("start --wait --for ready of a guest whose probe fails: exit %d, want 124 saying why it is not ready; output:\n%s", code, out)
	}
	f.Eventually("VM probe-ok Ready", bootTimeout, func(ctx context.Context) (bool, error) {
		cur := &virtv1.VirtualMachine{}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(ok), cur); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, virtv1.VirtualMachineReady)
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Errorf("Ready: %+v", c)
	})
	vmi := waitRunning(t, f, "probe-bad", "")
	consoleContains(t, f, vmi, "eth0 ") // the guest is up on the network: only the probe keeps it unready
	f.Eventually("probe-bad says its readiness probe has not passed", time.Minute, func(ctx context.Context) (bool, error) {
		cur := &virtv1.VirtualMachineInstance{}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(vmi), cur); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, virtv1.VirtualMachineInstanceReady)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "readiness probe"), fmt.Errorf("Ready: %+v", c)
	})
}

// A liveness probe reaches the guest through its launcher Pod: when it fails, the kubelet stops the
// launcher, which shuts the guest down and fails the instance (reason Terminated, as KubeVirt fails
// it); a guest whose probe passes runs on.
func TestLivenessProbeFailsTheInstance(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	const delay, period = 30, 2
	probe := func(port int32, threshold int32) *virtv1.Probe {
		return &virtv1.Probe{InitialDelaySeconds: delay, PeriodSeconds: period, FailureThreshold: threshold,
			ProbeHandler: virtv1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(port)}}}
	}
	alive := demoVM(f.Namespace, "alive", virtv1.RunStrategyAlways, 0, "#!/bin/sh\nhttpd -p 8080 -h /var/www\n")
	alive.Spec.Template.Spec.LivenessProbe = probe(8080, 3)
	dead := demoVM(f.Namespace, "dead", virtv1.RunStrategyOnce, 0, "")
	dead.Spec.Template.Spec.LivenessProbe = probe(8081, 2)
	f.Create(alive)
	f.Create(dead)
	running := waitRunning(t, f, "alive", "")
	first := waitRunning(t, f, "dead", "")

	f.Eventually("dead failed with reason Terminated", bootTimeout+time.Minute, func(ctx context.Context) (bool, error) {
		cur := &virtv1.VirtualMachineInstance{}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(first), cur); err != nil {
			return false, err
		}
		if cur.UID != first.UID {
			return false, fmt.Errorf("a new instance %s replaced %s", cur.UID, first.UID)
		}
		return cur.Status.Phase == virtv1.Failed && cur.Status.Reason == launcherv1.ReasonTerminated,
			fmt.Errorf("phase %s, reason %q", cur.Status.Phase, cur.Status.Reason)
	})
	f.Eventually("dead's launcher Pod Failed", time.Minute, func(ctx context.Context) (bool, error) {
		pod := &corev1.Pod{}
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: first.Status.LauncherPod}, pod); err != nil {
			return false, err
		}
		return pod.Status.Phase == corev1.PodFailed, fmt.Errorf("phase %s", pod.Status.Phase)
	})

	// alive's probe has passed for several periods past its initial delay: it runs on, untouched.
	f.Eventually("alive probed past its initial delay", 2*time.Minute, func(ctx context.Context) (bool, error) {
		cur := &virtv1.VirtualMachineInstance{}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(running), cur); err != nil {
			return false, err
		}
		if cur.UID != running.UID || cur.Status.Phase != virtv1.Running {
			t.Fatalf("alive: instance %s is %s (%s), want %s Running", cur.UID, cur.Status.Phase, cur.Status.Reason, running.UID)
		}
		p := &corev1.Pod{}
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: cur.Status.LauncherPod}, p); err != nil {
			return false, err
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.Name == launcherv1.ComputeContainer && c.State.Running != nil {
				up := time.Since(c.State.Running.StartedAt.Time)
				return up > (delay+4*period)*time.Second, fmt.Errorf("compute container up %s", up.Round(time.Second))
			}
		}
		t.Fatalf("alive: the compute container is not running: %+v", p.Status.ContainerStatuses)
		return false, nil
	})
}

// A VM made with `virtctl create vm --instancetype --preference` boots with the instancetype's CPU
// count and memory (as the guest counts them) and the preference's devices, and records the
// revision it pinned.
func TestVMFromInstancetypeAndPreferenceBoots(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	ctx := f.Context()
	it := &itv1beta1.VirtualMachineInstancetype{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: "small"},
		Spec: itv1beta1.VirtualMachineInstancetypeSpec{CPU: itv1beta1.CPUInstancetype{Guest: 2}, Memory: itv1beta1.MemoryInstancetype{Guest: resource.MustParse("128Mi")}}}
	pref := &itv1beta1.VirtualMachinePreference{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: "demo"},
		Spec: itv1beta1.VirtualMachinePreferenceSpec{
			CPU:                                    &itv1beta1.CPUPreferences{PreferredCPUTopology: ptr.To(itv1beta1.Cores)},
			Devices:                                &itv1beta1.DevicePreferences{PreferredRng: &virtv1.Rng{}},
			PreferredTerminationGracePeriodSeconds: ptr.To(int64(0)),
		}}
	f.Create(it)
	f.Create(pref)

	userData := filepath.Join(t.TempDir(), "user-data")
	script := "#!/bin/sh\necho \"cpus: $(grep -c ^processor /proc/cpuinfo)\"\necho \"$(grep MemTotal /proc/meminfo)\"\n" +
		"echo \"rng: $(cat /sys/class/misc/hw_random/rng_current)\"\n"
	if err := os.WriteFile(userData, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	manifest, code := virtctl(t, f, "", "create", "vm", "--name", "sized", "--volume-containerdisk", "src:kubevirt/cirros-container-disk-demo:latest",
		"--instancetype", "virtualmachineinstancetype/small", "--preference", "vmpref/demo", "--cloud-init-user-data-file", userData)
	if code != 0 {
		t.Fatalf("create vm: exit %d: %s", code, manifest)
	}
	apply := exec.CommandContext(ctx, kubectl(t), "--kubeconfig", framework.Kubeconfig(), "-n", f.Namespace, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(manifest)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v: %s\n%s", err, out, manifest)
	}
	vmi := waitRunning(t, f, "sized", "")
	consoleContains(t, f, vmi, "user-data exited with status 0")
	console := f.PodLogs(vmi.Status.LauncherPod, "guest-console-log")
	if !strings.Contains(console, "cpus: 2") || !strings.Contains(console, "rng: virtio_rng") {
		t.Errorf("the guest does not see 2 vCPUs and virtio-rng; console:\n%s", tail(console, 20))
	}
	m := regexp.MustCompile(`MemTotal:\s+(\d+) kB`).FindStringSubmatch(console)
	if m == nil {
		t.Fatalf("no MemTotal on the console:\n%s", tail(console, 20))
	}
	// 128Mi is 131072 kB; the kernel keeps some for itself (64M guests see 51648 kB of 62500).
	if kb, _ := strconv.Atoi(m[1]); kb < 100_000 || kb > 131_072 {
		t.Errorf("guest MemTotal %d kB, want the instancetype's 128Mi less the kernel's share", kb)
	}
	if c := vmi.Spec.Domain.CPU; c == nil || c.Cores != 2 || c.Sockets != 1 {
		t.Errorf("instance CPU %+v, want 1 socket of 2 cores (the preference's topology)", c)
	}
	vm := &virtv1.VirtualMachine{}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: "sized"}, vm); err != nil {
		t.Fatal(err)
	}
	if r := vm.Status.InstancetypeRef; r == nil || r.ControllerRevisionRef == nil || r.Name != "small" {
		t.Errorf("status.instancetypeRef = %+v, want the pinned revision of small", r)
	}
	// virtctl expand: the VM as its instance is made, through the server's expand-spec.
	out, code := virtctl(t, f, "", "expand", "--vm", "sized", "-o", "json")
	var expanded virtv1.VirtualMachine
	if code != 0 || json.Unmarshal([]byte(out), &expanded) != nil || expanded.Spec.Instancetype != nil || expanded.Spec.Preference != nil ||
		expanded.Spec.Template.Spec.Domain.CPU == nil || expanded.Spec.Template.Spec.Domain.CPU.Cores != 2 ||
		expanded.Spec.Template.Spec.Domain.Memory == nil || expanded.Spec.Template.Spec.Domain.Memory.Guest.String() != "128Mi" {
		t.Errorf("virtctl expand --vm sized: exit %d, want 2 cores and 128Mi and no instancetype or preference; output:\n%s", code, out)
	}
}

// A VM whose disk is a DataVolume waits, saying CDI is not installed, until the claim the
// DataVolume would have provisioned exists; then it runs on that claim.
func TestDataVolumeDiskWithoutCDI(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	vm := demoVM(f.Namespace, "dv", virtv1.RunStrategyAlways, 0, "")
	spec := &vm.Spec.Template.Spec
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, virtv1.Disk{Name: "data", Serial: "dvdata", Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}})
	spec.Volumes = append(spec.Volumes, virtv1.Volume{Name: "data", VolumeSource: virtv1.VolumeSource{DataVolume: &virtv1.DataVolumeSource{Name: "dv-data"}}})
	f.Create(vm)
	f.Eventually("the VM says CDI is not installed", time.Minute, func(ctx context.Context) (bool, error) {
		cur := &virtv1.VirtualMachine{}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(vm), cur); err != nil {
			return false, err
		}
		for _, c := range cur.Status.Conditions {
			if c.Type == virtv1.VirtualMachineReady && c.Reason == "CDINotInstalled" && strings.Contains(c.Message, "dv-data") {
				return cur.Status.PrintableStatus == virtv1.VirtualMachineStatusPvcNotFound, fmt.Errorf("status %s", cur.Status.PrintableStatus)
			}
		}
		return false, fmt.Errorf("conditions %+v", cur.Status.Conditions)
	})
	f.Create(&corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "dv-data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}},
		},
	})
	vmi := waitRunning(t, f, "dv", "")
	found := false
	for _, v := range vmi.Spec.Volumes {
		found = found || (v.DataVolume != nil && v.DataVolume.Name == "dv-data")
	}
	if !found {
		t.Errorf("the instance lost its dataVolume volume: %+v", vmi.Spec.Volumes)
	}
}

// The demo guest's disk boots through OVMF when the VM asks for EFI (without Secure Boot: the demo
// guest is not signed), in 256Mi.
func TestEFIBootOfTheDemoGuest(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	vm := demoVM(f.Namespace, "efi", virtv1.RunStrategyAlways, 0, "")
	spec := &vm.Spec.Template.Spec
	spec.Domain.Firmware = &virtv1.Firmware{Bootloader: &virtv1.Bootloader{EFI: &virtv1.EFI{SecureBoot: ptr.To(false)}}}
	// Under OVMF the demo guest needs ≥ 128 MiB (at 122 MiB it hangs after syslinux.efi loads it).
	spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}
	spec.Domain.Devices.Disks = []virtv1.Disk{{Name: "root", Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}}}
	spec.Volumes = []virtv1.Volume{{Name: "root", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: framework.Image("demo-containerdisk")}}}}
	f.Create(vm)
	vmi := waitRunning(t, f, "efi", "")
	consoleContains(t, f, vmi, "booted")
	if console := f.PodLogs(vmi.Status.LauncherPod, "guest-console-log"); !strings.Contains(console, "efi: EFI v") {
		t.Errorf("the kernel did not start under EFI; console:\n%s", tail(console, 30))
	}
}

// A hostDisk image (DiskOrCreate) is created on the node, and what the guest writes on it is there
// after a stop and a start.
func TestHostDiskKeepsDataAcrossStopStart(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	// A hostDisk is node-local storage: the VM stays on the local cluster's first node, whose host
	// disk directory is this machine's.
	dir := filepath.Join(launcherv1.HostDiskRoot, f.Namespace)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	diskKeepsDataAcrossStopStart(t, f, "hostdisk", f.HostNode(), virtv1.VolumeSource{HostDisk: &virtv1.HostDisk{
		Path: filepath.Join(dir, "data.img"), Type: virtv1.HostDiskExistsOrCreate, Capacity: resource.MustParse("64Mi"),
	}})
	if fi, err := os.Stat(filepath.Join(dir, "data.img")); err != nil || fi.Size() != 64<<20 {
		t.Errorf("the image on the node: %v, %v", fi, err)
	}
	ns, err := f.Clientset.CoreV1().Namespaces().Get(f.Context(), f.Namespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if uid, err := os.ReadFile(filepath.Join(dir, launcherv1.HostDiskNamespaceUIDFile)); err != nil || string(uid) != string(ns.UID) {
		t.Errorf("the images' directory records namespace UID %q (%v), want %s: the agent removes them with the namespace", uid, err, ns.UID)
	}
}

// configDisksUserData mounts every disk with a serial at /mnt/<serial> and prints what the
// ConfigMap, Secret, ServiceAccount and config drive disks hold.
const configDisksUserData = `#!/bin/sh
for b in /sys/block/vd*; do s=$(cat $b/serial 2>/dev/null); [ -n "$s" ] && mkdir -p /mnt/$s && mount -t iso9660 -o ro /dev/${b##*/} /mnt/$s; done
echo "cfg: $(cat /mnt/cfg/greeting)"
echo "sec: $(cat /mnt/sec/password)"
echo "sa: $(cat /mnt/sa/namespace) $(head -c 3 /mnt/sa/token)"
echo "cd: $(cat /mnt/cd/openstack/latest/user_data)"
`

// ConfigMap, Secret and ServiceAccount volumes reach the guest as disks holding their files; a
// cloudInitConfigDrive volume as an OpenStack config drive.
func TestConfigMapSecretAndServiceAccountDisks(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	f.Create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"greeting": "hello from a ConfigMap"}})
	f.Create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app"}, StringData: map[string]string{"password": "s3cret"}})
	vm := demoVM(f.Namespace, "configdisks", virtv1.RunStrategyAlways, 0, configDisksUserData)
	spec := &vm.Spec.Template.Spec
	for serial, src := range map[string]virtv1.VolumeSource{
		"cfg": {ConfigMap: &virtv1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}},
		"sec": {Secret: &virtv1.SecretVolumeSource{SecretName: "app"}},
		"sa":  {ServiceAccount: &virtv1.ServiceAccountVolumeSource{ServiceAccountName: "default"}},
		"cd":  {CloudInitConfigDrive: &virtv1.CloudInitConfigDriveSource{UserData: "a config drive"}},
	} {
		spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, virtv1.Disk{Name: serial, Serial: serial, Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}})
		spec.Volumes = append(spec.Volumes, virtv1.Volume{Name: serial, VolumeSource: src})
	}
	f.Create(vm)
	vmi := waitRunning(t, f, "configdisks", "")
	consoleContains(t, f, vmi, "user-data exited with status 0")
	console := f.PodLogs(vmi.Status.LauncherPod, launcherv1.ConsoleLogContainer)
	for _, want := range []string{"cfg: hello from a ConfigMap", "sec: s3cret", "sa: " + f.Namespace + " eyJ", "cd: a config drive"} {
		if !strings.Contains(console, want) {
			t.Errorf("%q not on the console:\n%s", want, tail(console, 20))
		}
	}
}
