//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// The guest agent as a CI script meets it, on the demo guest (Debian's qemu-ga in its initramfs):
// start --wait --for agent, exec (output, exit codes, stdin, a timeout), guestosinfo, userlist and
// fslist answering from the guest and the status carrying its OS, a freeze that blocks a write
// until the unfreeze, a soft reboot through the agent (a new boot id in the same instance), and
// stop --wait. No sleeps: every wait is for a condition.
func TestGuestAgentAndExec(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	vm := demoVM(f.Namespace, "ga", virtv1.RunStrategyHalted, 30, "")
	spec := &vm.Spec.Template.Spec
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, virtv1.Disk{Name: "scratch", Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}})
	spec.Volumes = append(spec.Volumes, virtv1.Volume{Name: "scratch", VolumeSource: virtv1.VolumeSource{
		EmptyDisk: &virtv1.EmptyDiskSource{Capacity: resource.MustParse("16Mi")}}})
	f.Create(vm)

	began := time.Now()
	out, code := virtctl(t, f, "", "start", "ga", "--wait", "--for", "agent", "--timeout", "4m")
	if code != 0 || !strings.Contains(out, "AgentConnected") {
		t.Fatalf("start --wait --for agent: exit %d, output:\n%s", code, tail(out, 20))
	}
	t.Logf("start → guest agent connected: %s", time.Since(began).Round(100*time.Millisecond))

	execCommands(t, f)
	guestReports(t, f)
	freezeBlocksWrites(t, f)
	softRebootThroughTheAgent(t, f)
	execRoundTrip(t, f)

	if out, code := virtctl(t, f, "", "stop", "ga", "--wait", "--timeout", "2m"); code != 0 {
		t.Fatalf("stop --wait: exit %d, output:\n%s", code, tail(out, 20))
	}
}

// execCommands: output on the right stream, the command's exit code, stdin, a timeout (124), a
// program the guest does not have.
func execCommands(t *testing.T, f *framework.Framework) {
	t.Helper()
	if out, code := virtctl(t, f, "", "exec", "ga", "--", "uname", "-r"); code != 0 || !strings.Contains(out, "podvirt") {
		t.Errorf("exec uname -r: exit %d, output:\n%s", code, out)
	}
	out, code := virtctl(t, f, "", "exec", "ga", "--", "sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 7")
	if code != 7 || !strings.Contains(out, "to-stdout") || !strings.Contains(out, "to-stderr") || !strings.Contains(out, "command terminated with exit code 7") {
		t.Errorf("exec of a failing command: exit %d, want 7 with both streams; output:\n%s", code, out)
	}
	if out, code := virtctl(t, f, "piped through the guest\n", "exec", "ga", "-i", "--", "cat"); code != 0 || out != "piped through the guest\n" {
		t.Errorf("exec -i cat: exit %d, output %q", code, out)
	}
	if out, code := virtctl(t, f, "", "exec", "ga", "--timeout", "2s", "--", "sleep", "30"); code != 124 || !strings.Contains(out, "did not exit within 2s") {
		t.Errorf("exec past its timeout: exit %d, want 124; output:\n%s", code, out)
	}
	if out, code := virtctl(t, f, "", "exec", "ga", "--", "no-such-program"); code != 1 || !strings.Contains(out, "no-such-program") {
		t.Errorf("exec of a program the guest lacks: exit %d, want 1 naming it; output:\n%s", code, out)
	}
}

// guestReports: guestosinfo, userlist and fslist answer from the guest; the instance's status carries
// the OS and the AgentConnected condition.
func guestReports(t *testing.T, f *framework.Framework) {
	t.Helper()
	var info virtv1.VirtualMachineInstanceGuestAgentInfo
	out, code := virtctl(t, f, "", "guestosinfo", "ga")
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info.OS.ID != "podvirt" || info.Hostname != "podvirt-demo" ||
		!strings.HasPrefix(info.GAVersion, "7.") || info.OS.KernelRelease == "" {
		t.Errorf("guestosinfo: exit %d, want the demo guest's OS, host name and agent version; output:\n%s", code, out)
	}
	var users virtv1.VirtualMachineInstanceGuestOSUserList
	if out, code := virtctl(t, f, "", "userlist", "ga"); code != 0 || json.Unmarshal([]byte(out), &users) != nil || users.Items == nil {
		t.Errorf("userlist: exit %d, want a list; output:\n%s", code, out)
	}
	f.Eventually("the status carries the guest's OS and AgentConnected", time.Minute, func(ctx context.Context) (bool, error) {
		vmi := &virtv1.VirtualMachineInstance{}
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: "ga"}, vmi); err != nil {
			return false, err
		}
		return vmi.Status.GuestOSInfo.ID == "podvirt" && meta.IsStatusConditionTrue(vmi.Status.Conditions, virtv1.VirtualMachineInstanceAgentConnected), nil
	})
}

// freezeBlocksWrites mounts the scratch disk, freezes: the guest and the status say frozen, a write
// started on the serial console does not complete while frozen, and completes after the unfreeze.
func freezeBlocksWrites(t *testing.T, f *framework.Framework) {
	t.Helper()
	if out, code := virtctl(t, f, "", "exec", "ga", "--", "sh", "-c", "mke2fs -q /dev/vda && mkdir -p /mnt/s && mount /dev/vda /mnt/s"); code != 0 {
		t.Fatalf("mount the scratch disk: exit %d, output:\n%s", code, out)
	}
	// What the agent reports is cached for a few seconds: the new mount shows up at a later fetch.
	f.Eventually("fslist shows the mounted scratch disk with its size", time.Minute, func(context.Context) (bool, error) {
		var fs virtv1.VirtualMachineInstanceFileSystemList
		out, code := virtctl(t, f, "", "fslist", "ga")
		return code == 0 && json.Unmarshal([]byte(out), &fs) == nil &&
			slices.ContainsFunc(fs.Items, func(i virtv1.VirtualMachineInstanceFileSystem) bool {
				return i.MountPoint == "/mnt/s" && i.TotalBytes > 0
			}), nil
	})

	if out, code := virtctl(t, f, "", "freeze", "ga", "--unfreeze-timeout", "5m"); code != 0 {
		t.Fatalf("freeze: exit %d, output:\n%s", code, out)
	}
	var info virtv1.VirtualMachineInstanceGuestAgentInfo
	if out, code := virtctl(t, f, "", "guestosinfo", "ga"); code != 0 || json.Unmarshal([]byte(out), &info) != nil || info.FSFreezeStatus != virtv1.FSFrozen {
		t.Errorf("guestosinfo while frozen: exit %d, want fsFreezeStatus frozen; output:\n%s", code, out)
	}
	f.Eventually("the status says frozen", time.Minute, func(ctx context.Context) (bool, error) {
		vmi := &virtv1.VirtualMachineInstance{}
		err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: "ga"}, vmi)
		return err == nil && vmi.Status.FSFreezeStatus == virtv1.FSFrozen, err
	})
	// The write runs in the background; two seconds later (the guest's own wait) it has not returned.
	// The words are split so that the echoed command line does not match.
	const write = "(echo data > /mnt/s/file; sync; touch /tmp/synced) & sleep 2; [ -e /tmp/synced ] && echo SYN''CED || echo BLO''CKED\n"
	out, code := virtctl(t, f, write, "console", "ga", "--expect", "SYNCED|BLOCKED", "--timeout", "1")
	if code != 0 || !strings.Contains(out, "BLOCKED") {
		t.Fatalf("a write to the frozen file system: exit %d, want it blocked; output:\n%s", code, tail(out, 10))
	}
	if out, code := virtctl(t, f, "", "unfreeze", "ga"); code != 0 {
		t.Fatalf("unfreeze: exit %d, output:\n%s", code, out)
	}
	out, code = virtctl(t, f, "", "exec", "ga", "--timeout", "30s", "--", "sh", "-c", "until [ -e /tmp/synced ]; do sleep 0.1; done; cat /mnt/s/file")
	if code != 0 || out != "data\n" {
		t.Fatalf("the blocked write after the unfreeze: exit %d, output %q", code, out)
	}
	f.Eventually("the status no longer says frozen", time.Minute, func(ctx context.Context) (bool, error) {
		vmi := &virtv1.VirtualMachineInstance{}
		err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: "ga"}, vmi)
		return err == nil && vmi.Status.FSFreezeStatus == "", err
	})
}

var bootIDLine = regexp.MustCompile(`^[0-9a-f-]{36}\n$`)

// softRebootThroughTheAgent: softreboot of a guest with an agent goes through the agent (the
// guest's shutdown says so on its console); the boot id changes, the instance stays.
func softRebootThroughTheAgent(t *testing.T, f *framework.Framework) {
	t.Helper()
	before, code := virtctl(t, f, "", "exec", "ga", "--", "cat", "/proc/sys/kernel/random/boot_id")
	if code != 0 || !bootIDLine.MatchString(before) {
		t.Fatalf("boot id: exit %d, output %q", code, before)
	}
	vmi := &virtv1.VirtualMachineInstance{}
	if err := f.Client.Get(f.Context(), client.ObjectKey{Namespace: f.Namespace, Name: "ga"}, vmi); err != nil {
		t.Fatal(err)
	}
	if out, code := virtctl(t, f, "", "softreboot", "ga"); code != 0 {
		t.Fatalf("softreboot: exit %d, output:\n%s", code, out)
	}
	var after string
	f.Eventually("the rebooted guest's agent answers with a new boot id", 3*time.Minute, func(context.Context) (bool, error) {
		out, code := virtctl(t, f, "", "exec", "ga", "--", "cat", "/proc/sys/kernel/random/boot_id")
		after = out
		return code == 0 && bootIDLine.MatchString(out) && out != before, nil
	})
	if out, code := virtctl(t, f, "", "logs", "ga"); code != 0 || !strings.Contains(out, "reboot asked by the guest agent") {
		t.Errorf("the guest's console does not show the agent's reboot: exit %d, output:\n%s", code, tail(out, 20))
	}
	again := &virtv1.VirtualMachineInstance{}
	if err := f.Client.Get(f.Context(), client.ObjectKey{Namespace: f.Namespace, Name: "ga"}, again); err != nil || again.UID != vmi.UID {
		t.Fatalf("the soft reboot replaced the instance: %v, uid %s → %s", err, vmi.UID, again.UID)
	}
	t.Logf("soft reboot through the agent: boot id %s → %s", strings.TrimSpace(before), strings.TrimSpace(after))
}

// execRoundTrip prints the figure the issue asks for: virtctl exec of true in the guest against
// kubectl exec into a Pod (the instance's launcher Pod, whose image has no true: qemu-img --version,
// a small ELF), medians of the same run.
func execRoundTrip(t *testing.T, f *framework.Framework) {
	t.Helper()
	vmi := &virtv1.VirtualMachineInstance{}
	if err := f.Client.Get(f.Context(), client.ObjectKey{Namespace: f.Namespace, Name: "ga"}, vmi); err != nil {
		t.Fatal(err)
	}
	const runs = 5
	median := func(what string, run func() error) time.Duration {
		var took []time.Duration
		for range runs {
			start := time.Now()
			if err := run(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		return took[runs/2]
	}
	virt := median("virtctl exec true", func() error {
		if out, code := virtctl(t, f, "", "exec", "ga", "--", "true"); code != 0 {
			return &execFailed{out}
		}
		return nil
	})
	kube := median("kubectl exec qemu-img --version", func() error {
		out, err := exec.CommandContext(f.Context(), kubectl(t), "--kubeconfig", framework.Kubeconfig(), "-n", f.Namespace,
			"exec", vmi.Status.LauncherPod, "-c", launcherv1.ComputeContainer, "--", "qemu-img", "--version").CombinedOutput()
		if err != nil {
			return &execFailed{string(out) + err.Error()}
		}
		return nil
	})
	t.Logf("exec round trip (median of %d): virtctl exec true in the guest %s, kubectl exec qemu-img --version in its launcher Pod %s, ratio %.2f",
		runs, virt.Round(time.Millisecond), kube.Round(time.Millisecond), float64(virt)/float64(kube))
}

type execFailed struct{ out string }

func (e *execFailed) Error() string { return e.out }
