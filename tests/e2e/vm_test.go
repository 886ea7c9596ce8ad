//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// The seed's vm-cirros manifest, applied unchanged and started as the seed says
// (kubectl patch … running:true), boots with exactly its 64M and runs its cloud-init user-data.
func TestSeedVMCirrosBootsAndRunsUserData(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	applySeed(t, f)
	vm := &virtv1.VirtualMachine{}
	if err := f.Client.Get(f.Context(), client.ObjectKey{Namespace: f.Namespace, Name: "vm-cirros"}, vm); err != nil {
		t.Fatal(err)
	}
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"running":true}}`))
	if err := f.Client.Patch(f.Context(), vm, patch); err != nil {
		t.Fatal(err)
	}
	vmi := waitRunning(t, f, "vm-cirros", "")
	consoleContains(t, f, vmi, "Podvirt demo guest")
	consoleContains(t, f, vmi, "printed from cloud-init userdata")

	// Exactly 64M = 64,000,000 bytes asked; libvirt's qemu driver gives whole MiB (62 MiB), never more.
	if got := vmi.Spec.Domain.Resources.Requests.Memory().Value(); got != 64_000_000 {
		t.Errorf("instance memory %d, want the seed's 64000000", got)
	}
	logs := f.PodLogs(vmi.Status.LauncherPod, launcherv1.ComputeContainer)
	if !strings.Contains(logs, "asked 64000000 bytes, qemu got 65011712 bytes") {
		t.Errorf("the launcher did not give qemu 64M rounded to whole MiB; its log:\n%s", tail(logs, 10))
	}
	f.Eventually("VM shows Running and ready", time.Minute, func(ctx context.Context) (bool, error) {
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return false, err
		}
		return vm.Status.PrintableStatus == virtv1.VirtualMachineStatusRunning && vm.Status.Ready, fmt.Errorf("status %s", vm.Status.PrintableStatus)
	})
	if c := meta.FindStatusCondition(vmi.Status.Conditions, virtv1.VirtualMachineInstanceSoftwareEmulation); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("no SoftwareEmulation condition on an emulated guest: %+v", vmi.Status.Conditions)
	}
}

// Stopping with a grace period powers the guest off through ACPI; a grace period of 0 kills it.
func TestStopIsGracefulOrForced(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	f.Create(demoVM(f.Namespace, "graceful", virtv1.RunStrategyAlways, 30, ""))
	f.Create(demoVM(f.Namespace, "forced", virtv1.RunStrategyAlways, 0, ""))
	graceful := waitRunning(t, f, "graceful", "")
	forced := waitRunning(t, f, "forced", "")
	consoleContains(t, f, graceful, "Podvirt demo guest")
	consoleContains(t, f, forced, "Podvirt demo guest")

	gracefulConsole := followConsole(t, f, graceful)
	forcedConsole := followConsole(t, f, forced)
	setRunStrategy(t, f, "graceful", virtv1.RunStrategyHalted)
	setRunStrategy(t, f, "forced", virtv1.RunStrategyHalted)
	waitGone(t, f, "graceful", 2*time.Minute)
	waitGone(t, f, "forced", 2*time.Minute)

	if out := gracefulConsole.wait(t, time.Minute); !strings.Contains(out, "ACPI power button, powering off") {
		t.Errorf("graceful stop: the guest saw no ACPI power-off; console:\n%s", tail(out, 15))
	}
	out := forcedConsole.wait(t, time.Minute)
	// The absence of a power-off proves something only if the capture holds the guest's output: it
	// must show the boot banner (the log is followed from its start) and the guest running up to the end.
	if !strings.Contains(out, "Podvirt demo guest") {
		t.Errorf("forced stop: the console capture lacks the guest's boot banner, so it cannot show how the guest ended; console:\n%s", tail(out, 15))
	}
	if strings.Contains(out, "ACPI power button") {
		t.Errorf("grace period 0 must kill the guest, not power it off; console:\n%s", tail(out, 15))
	}
}

// Pausing stops the guest's clock and sets the Paused condition; unpausing resumes both. The
// guest's clock is read over its declared port 80 at the launcher Pod's address.
func TestPauseStopsTheGuestClock(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	f.Create(demoVM(f.Namespace, "pausable", virtv1.RunStrategyAlways, 0, ""))
	vmi := waitRunning(t, f, "pausable", "")
	before := waitUptime(t, f, vmi)

	agentCall(f, vmi, "pause")
	f.Eventually("Paused condition and VM status Paused", time.Minute, func(ctx context.Context) (bool, error) {
		cur := &virtv1.VirtualMachineInstance{}
		vm := &virtv1.VirtualMachine{}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(vmi), cur); err != nil {
			return false, err
		}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(vmi), vm); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(cur.Status.Conditions, virtv1.VirtualMachineInstancePaused) &&
			vm.Status.PrintableStatus == virtv1.VirtualMachineStatusPaused, fmt.Errorf("vm %s", vm.Status.PrintableStatus)
	})
	pausedAt := time.Now()
	// A paused guest answers nothing; wait (bounded) until 5 s of wall time have passed while it stays silent.
	f.Eventually("5 s pass with the guest silent", time.Minute, func(ctx context.Context) (bool, error) {
		if _, err := guestUptime(ctx, vmi); err == nil {
			t.Fatal("a paused guest answered")
		}
		return time.Since(pausedAt) > 5*time.Second, nil
	})
	agentCall(f, vmi, "unpause")
	wall := time.Since(pausedAt).Seconds()
	after := waitUptime(t, f, vmi)
	guestAdvance := after - before
	if guestAdvance > wall-3 {
		t.Errorf("guest clock advanced %.1f s over a %.1f s pause: it did not stop", guestAdvance, wall)
	}
	f.Eventually("Paused condition cleared", time.Minute, func(ctx context.Context) (bool, error) {
		cur := &virtv1.VirtualMachineInstance{}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(vmi), cur); err != nil {
			return false, err
		}
		return !meta.IsStatusConditionTrue(cur.Status.Conditions, virtv1.VirtualMachineInstancePaused), nil
	})
	later := waitUptime(t, f, vmi)
	if later <= after {
		t.Errorf("guest clock did not resume: %.2f then %.2f", after, later)
	}
}

// When qemu dies the instance fails, and an Always VM gets a new instance that runs.
func TestQemuKilledVMComesBack(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	f.Create(demoVM(f.Namespace, "phoenix", virtv1.RunStrategyAlways, 0, ""))
	first := waitRunning(t, f, "phoenix", "")
	killQemu(t, first)
	f.Eventually("instance failed", 2*time.Minute, func(ctx context.Context) (bool, error) {
		cur := &virtv1.VirtualMachineInstance{}
		err := f.Client.Get(ctx, client.ObjectKeyFromObject(first), cur)
		if client.IgnoreNotFound(err) != nil {
			return false, err
		}
		// Failed, or already replaced by the VM controller.
		return err != nil || cur.UID != first.UID || cur.Status.Phase == virtv1.Failed, fmt.Errorf("phase %s", cur.Status.Phase)
	})
	second := waitRunning(t, f, "phoenix", string(first.UID))
	consoleContains(t, f, second, "Podvirt demo guest")
}

// Deleting the node agent's Pod leaves the guest running (its clock continues) and status updates
// resume with the new agent.
func TestNodeAgentRestartLeavesGuestRunning(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	f.Create(demoVM(f.Namespace, "steady", virtv1.RunStrategyAlways, 0, ""))
	vmi := waitRunning(t, f, "steady", "")
	before := waitUptime(t, f, vmi)

	var pods corev1.PodList
	if err := f.Client.List(f.Context(), &pods, client.InNamespace("podvirt"), client.MatchingLabels{"app.kubernetes.io/name": "virt-handler"}); err != nil {
		t.Fatalf("node agent pods: %v", err)
	}
	var old corev1.Pod
	for _, p := range pods.Items {
		if p.Spec.NodeName == vmi.Status.NodeName {
			old = p
		}
	}
	if old.Name == "" {
		t.Fatalf("no node agent pod on %s among %d", vmi.Status.NodeName, len(pods.Items))
	}
	if err := f.Client.Delete(f.Context(), &old); err != nil {
		t.Fatal(err)
	}
	f.Eventually("a new node agent is ready", 2*time.Minute, func(ctx context.Context) (bool, error) {
		ds := &appsv1.DaemonSet{}
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "podvirt", Name: "virt-handler"}, ds); err != nil {
			return false, err
		}
		var now corev1.PodList
		if err := f.Client.List(ctx, &now, client.InNamespace("podvirt"), client.MatchingLabels{"app.kubernetes.io/name": "virt-handler"}); err != nil {
			return false, err
		}
		for _, p := range now.Items {
			if p.UID != old.UID && p.Spec.NodeName == old.Spec.NodeName && p.Status.Phase == corev1.PodRunning &&
				ds.Status.NumberReady == ds.Status.DesiredNumberScheduled {
				return true, nil
			}
		}
		return false, fmt.Errorf("ready %d of %d", ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)
	})
	after := waitUptime(t, f, vmi)
	if after <= before {
		t.Fatalf("the guest restarted: uptime %.1f before the agent restart, %.1f after", before, after)
	}
	cur := &virtv1.VirtualMachineInstance{}
	if err := f.Client.Get(f.Context(), client.ObjectKeyFromObject(vmi), cur); err != nil || cur.UID != vmi.UID {
		t.Fatalf("the instance was replaced: %v", err)
	}
	// Status updates resume: a pause through the new agent shows in the instance's conditions.
	agentCall(f, vmi, "pause")
	f.Eventually("new agent reports Paused", time.Minute, func(ctx context.Context) (bool, error) {
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(vmi), cur); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(cur.Status.Conditions, virtv1.VirtualMachineInstancePaused), nil
	})
	agentCall(f, vmi, "unpause")
}

// pvcUserData makes an ext2 filesystem on the disk with serial "data" at first boot, writes 64 KiB
// of random data, and at every boot prints the data's sha256.
const pvcUserData = `#!/bin/sh
for b in /sys/block/vd*; do [ "$(cat $b/serial 2>/dev/null)" = data ] && dev=/dev/${b##*/}; done
[ -n "$dev" ] || { echo "data-disk: missing"; exit 1; }
mkdir -p /mnt/data
if ! mount -t ext2 "$dev" /mnt/data 2>/dev/null; then
  mke2fs -q "$dev" && mount -t ext2 "$dev" /mnt/data && head -c 65536 /dev/urandom > /mnt/data/file && echo "data-disk: written"
fi
echo "data-sha256: $(sha256sum /mnt/data/file | cut -d' ' -f1)"
umount /mnt/data
`

var shaLine = regexp.MustCompile(`data-sha256: ([0-9a-f]{64})`)

// A file written on a PVC-backed disk is there, unchanged, after a stop and a start.
func TestPVCDiskKeepsDataAcrossStopStart(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	f.Create(&corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
		},
	})
	diskKeepsDataAcrossStopStart(t, f, "keeper", "", virtv1.VolumeSource{PersistentVolumeClaim: &virtv1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}})
}

// diskKeepsDataAcrossStopStart runs a VM (on node nodeName, if given) whose data disk comes from
// source: its first boot writes a file there, and after a stop and a start the file is read back
// unchanged.
func diskKeepsDataAcrossStopStart(t *testing.T, f *framework.Framework, name, nodeName string, source virtv1.VolumeSource) {
	t.Helper()
	vm := demoVM(f.Namespace, name, virtv1.RunStrategyAlways, 30, pvcUserData)
	spec := &vm.Spec.Template.Spec
	if nodeName != "" {
		spec.NodeSelector = map[string]string{corev1.LabelHostname: nodeName}
	}
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, virtv1.Disk{Name: "data", Serial: "data", Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}})
	spec.Volumes = append(spec.Volumes, virtv1.Volume{Name: "data", VolumeSource: source})
	f.Create(vm)

	first := waitRunning(t, f, name, "")
	consoleContains(t, f, first, "data-sha256: ")
	written := shaLine.FindStringSubmatch(f.PodLogs(first.Status.LauncherPod, launcherv1.ConsoleLogContainer))
	if written == nil || !strings.Contains(f.PodLogs(first.Status.LauncherPod, launcherv1.ConsoleLogContainer), "data-disk: written") {
		t.Fatalf("first boot did not write the data disk")
	}

	setRunStrategy(t, f, name, virtv1.RunStrategyHalted)
	waitGone(t, f, name, 2*time.Minute)
	setRunStrategy(t, f, name, virtv1.RunStrategyAlways)
	second := waitRunning(t, f, name, string(first.UID))
	consoleContains(t, f, second, "data-sha256: ")
	logs := f.PodLogs(second.Status.LauncherPod, launcherv1.ConsoleLogContainer)
	read := shaLine.FindStringSubmatch(logs)
	if read == nil || read[1] != written[1] || strings.Contains(logs, "data-disk: written") {
		t.Fatalf("data changed across stop/start: wrote %s, read %v; console:\n%s", written[1], read, tail(logs, 15))
	}
}
