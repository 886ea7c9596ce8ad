//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/localcluster"
	"github.com/podvirt/podvirt/nodeagent/launcher/consolelog"
	"github.com/podvirt/podvirt/tests/framework"
)

// serialLogBound is what the guest's serial log in the launcher's private directory may take on the
// node's disk at any moment: the console-log container keeps it under 4 × consolelog.MaxSerialLog
// at each of its looks (about 2 × while it keeps up), and a MiB covers what arrives between two
// looks (250 ms apart, longer on a loaded node: the container requests 5m CPU) at about 0.4 MiB/s,
// a guest's serial rate under emulation here.
const serialLogBound = 4*consolelog.MaxSerialLog + 1<<20

// podLogBound is what the guest-console-log container's log on the node may take: the kubelet
// keeps at most containerLogMaxFiles (5) files of containerLogMaxSize (10 MiB), older ones
// compressed, and looks every 10 s.
const podLogBound = 64 << 20

// podLogSeen is what the container log must have reached for the flood to count as seen: the
// kubelet rotates it past 10 MiB (containerLogMaxSize).
const podLogSeen = 8 << 20

// A guest writing without end to its serial port (the console) cannot fill its node's disk: the
// console log in the launcher's private directory stays within its rotation bound, the container
// log the kubelet keeps stays within the kubelet's, the node agents and virt-api never restart, and
// the guest itself is not held back. PODVIRT_E2E_SERIAL_FLOOD_MIB sets how much the guest writes
// (default 32 MiB, about 90 s here).
func TestASerialFloodCannotFillTheNode(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	mib := 32
	if v := os.Getenv("PODVIRT_E2E_SERIAL_FLOOD_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 16 {
			t.Fatalf("PODVIRT_E2E_SERIAL_FLOOD_MIB=%q: want a whole number of MiB, at least 16", v)
		}
		mib = n
	}
	before := restarts(t, f)
	vm := demoVM(f.Namespace, "flood", virtv1.RunStrategyAlways, 5, floodUserData(mib))
	// The first node shares this machine's mount namespace, where the kubelet keeps container logs.
	vm.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: localcluster.DefaultConfig().NodeName}
	f.Create(vm)
	vmi := waitRunning(t, f, vm.Name, "")
	pod := &corev1.Pod{}
	if err := f.Client.Get(f.Context(), client.ObjectKey{Namespace: vmi.Namespace, Name: vmi.Status.LauncherPod}, pod); err != nil {
		t.Fatal(err)
	}
	podLogs := filepath.Join("/var/log/pods", pod.Namespace+"_"+pod.Name+"_"+string(pod.UID), launcherv1.ConsoleLogContainer)
	pid := qemuPID(t, vmi)
	serialLog := filepath.Join("/proc", strconv.Itoa(pid), "root", launcherv1.PrivateDir, launcherv1.SerialLog)

	var mostSerial, mostPod int64
	var report string
	deadline := time.Now().Add(time.Duration(mib)*time.Second*2 + 5*time.Minute)
	tick := time.NewTicker(100 * time.Millisecond) // the serial log is looked at every 250 ms
	defer tick.Stop()
	for n := 0; ; n++ {
		<-tick.C
		mostSerial = max(mostSerial, diskUse(serialLog))
		mostPod = max(mostPod, dirDiskUse(podLogs))
		if mostSerial > serialLogBound || mostPod > podLogBound {
			break // fail below, with the figures
		}
		if n%20 != 0 {
			continue
		}
		if out, err := guestFlood(f.Context(), vmi); err == nil && strings.HasPrefix(out, "failed") {
			t.Fatalf("the guest says: %s", out)
		} else if err == nil && strings.HasPrefix(out, "done ") {
			report = out
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guest did not finish writing %d MiB to its serial port by %s; most on disk so far: serial log %.1f MiB, container log %.1f MiB",
				mib, deadline.Format(time.TimeOnly), mb(mostSerial), mb(mostPod))
		}
	}
	if report == "" {
		report = "stopped looking before it was done"
	}
	t.Logf("the guest writing %d MiB to its serial port (%s); most on the node's disk at once: serial log %.1f MiB (bound %.1f MiB), container log %.1f MiB (bound %.0f MiB)",
		mib, report, mb(mostSerial), mb(serialLogBound), mb(mostPod), mb(podLogBound))
	// A path that cannot be read counts 0: the flood must have been seen on both.
	if mostSerial < consolelog.MaxSerialLog/2 || mostPod < podLogSeen {
		t.Errorf("the flood was not seen: serial log at most %.1f MiB (want at least %.1f MiB: it is emptied past %.0f MiB), container log at most %.1f MiB (want at least %.0f MiB)",
			mb(mostSerial), mb(consolelog.MaxSerialLog/2), mb(consolelog.MaxSerialLog), mb(mostPod), mb(podLogSeen))
	}
	if mostSerial > serialLogBound {
		t.Errorf("the serial log took %.1f MiB of the node's disk, more than %.1f MiB", mb(mostSerial), mb(serialLogBound))
	}
	if mostPod > podLogBound {
		t.Errorf("the console-log container's log took %.1f MiB of the node's disk, more than %.0f MiB", mb(mostPod), mb(podLogBound))
	}
	if err := f.Client.Get(f.Context(), client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.RestartCount > 0 { // a restarted console-log container copies the log again from its start
			t.Errorf("container %s of %s restarted %d times during the flood", cs.Name, pod.Name, cs.RestartCount)
		}
	}
	after := restarts(t, f)
	for name, n := range after {
		if n > before[name] {
			t.Errorf("%s restarted during the flood (%d → %d restarts)", name, before[name], n)
		}
	}
}

// floodUserData makes the guest write mib MiB of 128-byte lines to its serial port once it has
// booted; /cgi-bin/flood answers "writing" until then and "done SECONDSs" after it (the guest's own
// time for the writing), or "failed: …".
func floodUserData(mib int) string {
	return fmt.Sprintf(`#!/bin/sh
echo writing > /run/flood
printf '#!/bin/sh\necho Content-Type: text/plain\necho\ncat /run/flood\n' > /var/www/cgi-bin/flood
chmod 755 /var/www/cgi-bin/flood
(line=x; for i in 1 2 3 4 5 6 7; do line=$line$line; done
 sleep 2; start=$(cut -d. -f1 /proc/uptime)
 if yes "$line" | head -c %d > /dev/ttyS0; then
   echo "done $(( $(cut -d. -f1 /proc/uptime) - start ))s" > /run/flood
 else echo "failed: the serial port refused the writing" > /run/flood; fi) </dev/null >/dev/null 2>&1 &
`, mib<<20)
}

// guestFlood asks a flood guest how its writing goes.
func guestFlood(ctx context.Context, vmi *virtv1.VirtualMachineInstance) (string, error) {
	if len(vmi.Status.Interfaces) == 0 || vmi.Status.Interfaces[0].IP == "" {
		return "", fmt.Errorf("instance %s has no address", vmi.Name)
	}
	return guestCGI(ctx, vmi.Status.Interfaces[0].IP, "flood")
}

// diskUse is the disk space a file takes (its allocated blocks), 0 when it cannot be read.
func diskUse(path string) int64 {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return 0
	}
	return st.Blocks * 512
}

// dirDiskUse is the disk space the files of a directory take.
func dirDiskUse(dir string) int64 {
	entries, _ := os.ReadDir(dir)
	var n int64
	for _, e := range entries {
		n += diskUse(filepath.Join(dir, e.Name()))
	}
	return n
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }
