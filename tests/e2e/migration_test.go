//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// Live migration of a running demo guest with `virtctl migrate --wait`, as a user does it: the
// guest's clock keeps counting across the move (no reboot), a `virtctl console` opened before in a
// real terminal reconnects by itself and runs a command on the moved guest, the instance shows the
// other node and its migration state, and the source Pod has completed with its guest gone.
func TestLiveMigration(t *testing.T) {
	f := framework.New(t)
	requireVirtAPI(f)
	far, host := otherNode(t, f), f.HostNode()
	before := runOnNode(t, f, "mover", far, nil)
	if c := meta.FindStatusCondition(before.Status.Conditions, virtv1.VirtualMachineInstanceLiveMigratable); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("LiveMigratable condition %+v, want True", c)
	}
	upBefore := waitUptime(t, f, before)

	term := newTerminal(t, f, fmt.Sprintf("%s --kubeconfig %s -n %s console mover; sleep 600", os.Getenv("PODVIRT_VIRTCTL"), framework.Kubeconfig(), f.Namespace))
	term.waitFor("the console connected", "The escape sequence is ^]", time.Minute)
	term.waitFor("the guest's prompt", "podvirt-demo#", time.Minute, "Enter")

	probe := probeOutage(t, f, "mover", before.Status.Interfaces[0].IP)
	t0 := time.Now()
	out, code := virtctl(t, f, "", "migrate", "mover", "--wait", "--timeout", "3m")
	took := time.Since(t0)
	if code != 0 || !strings.Contains(out, "VM mover was scheduled to migrate") || !strings.Contains(out, "Succeeded") {
		t.Fatalf("virtctl migrate --wait: exit %d, want 0 following the migration to Succeeded; output:\n%s", code, out)
	}
	after := getVMI(t, f, "mover")
	ms := after.Status.MigrationState
	switch {
	case after.UID != before.UID:
		t.Fatalf("a new instance %s replaced %s: the VM restarted instead of moving", after.UID, before.UID)
	case after.Status.NodeName != host || ms == nil || !ms.Completed || ms.Failed || ms.SourceNode != far || ms.TargetNode != host:
		t.Fatalf("after the migration: node %q, migration state %+v; want node %q, completed from %q", after.Status.NodeName, ms, host, far)
	case after.Status.LauncherPod != ms.TargetPod || ms.SourcePod != before.Status.LauncherPod:
		t.Fatalf("launcher pod %q, migration state %+v: want the target pod, moved from %q", after.Status.LauncherPod, ms, before.Status.LauncherPod)
	}
	f.Eventually("the instance reports its new address", time.Minute, func(ctx context.Context) (bool, error) {
		after = getVMI(t, f, "mover")
		return after.Status.Phase == virtv1.Running && len(after.Status.Interfaces) > 0 && after.Status.Interfaces[0].IP != before.Status.Interfaces[0].IP,
			fmt.Errorf("phase %s, interfaces %+v", after.Status.Phase, after.Status.Interfaces)
	})
	upAfter := waitUptime(t, f, after)
	gap, answers := probe.end()
	t.Logf("the guest's web server, probed every 10 ms from outside: longest gap between answers %s (%d answers)", gap.Round(time.Millisecond), answers)
	events := &corev1.EventList{}
	if err := f.Client.List(f.Context(), events, client.InNamespace(f.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.InvolvedObject.UID == after.UID && e.Reason == agentv1.EventMigrated {
			t.Logf("event: %s", e.Message)
		}
	}
	if upAfter < upBefore {
		t.Fatalf("guest uptime %.1f s after the move, %.1f s before: the guest rebooted", upAfter, upBefore)
	}
	t.Logf("virtctl migrate --wait: %s; guest uptime %.1f s → %.1f s", took.Round(time.Millisecond), upBefore, upAfter)

	src := &corev1.Pod{}
	f.Eventually("the source pod completed", time.Minute, func(ctx context.Context) (bool, error) {
		err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: ms.SourcePod}, src)
		return err == nil && src.Status.Phase == corev1.PodSucceeded, fmt.Errorf("source pod: %v, phase %s", err, src.Status.Phase)
	})
	qemus := 0
	for _, p := range processesWith([]byte(qemuMarker(f.Namespace, "mover"))) {
		if bytes.Contains(p, []byte("qemu-system")) {
			qemus++
		}
	}
	if qemus != 1 {
		t.Fatalf("%d qemu processes of the guest on the machine after the move, want 1", qemus)
	}

	term.waitFor("the console reconnected", "reconnecting", time.Minute)
	term.waitFor("the moved guest's prompt", "podvirt-demo#", time.Minute, "Enter")
	term.keys("echo moved-$((6*7))", "Enter")
	term.waitFor("a command on the moved guest", "moved-42", time.Minute)
	// The guest agent answers on the target too (its channel moved with the guest).
	f.Eventually("virtctl exec on the moved guest", time.Minute, func(context.Context) (bool, error) {
		out, code := virtctl(t, f, "", "exec", "mover", "--", "echo", "agent-moved")
		return code == 0 && out == "agent-moved\n", fmt.Errorf("exit %d: %s", code, out)
	})

	migrations := &virtv1.VirtualMachineInstanceMigrationList{}
	if err := f.Client.List(f.Context(), migrations, client.InNamespace(f.Namespace)); err != nil {
		t.Fatal(err)
	}
	if len(migrations.Items) != 1 || migrations.Items[0].Status.Phase != virtv1.MigrationSucceeded {
		t.Fatalf("migrations %+v, want one Succeeded", migrations.Items)
	}
	t.Logf("virtctl migrate --wait printed:\n%s", strings.TrimSpace(out))
}

// virtctl migrate-cancel of a migration in progress (made slow by the cluster's
// bandwidthPerMigration: 1 MiB/s for a 64 MiB guest), labelled with its instance by admission, is
// deleted, the guest stays on its node in the same instance, the abort is reported in
// its migration state; a second migrate-cancel finds nothing to cancel (exit 1).
func TestMigrateCancelAbortsAMigrationInProgress(t *testing.T) {
	f := framework.New(t)
	requireVirtAPI(f)
	setMigrationBandwidth(t, "1Mi")
	far := otherNode(t, f)
	before := runOnNode(t, f, "slow", far, nil)

	if out, code := virtctl(t, f, "", "migrate", "slow"); code != 0 {
		t.Fatalf("virtctl migrate: exit %d: %s", code, out)
	}
	var mig virtv1.VirtualMachineInstanceMigration
	f.Eventually("the migration runs", 2*time.Minute, func(ctx context.Context) (bool, error) {
		list := &virtv1.VirtualMachineInstanceMigrationList{}
		if err := f.Client.List(ctx, list, client.InNamespace(f.Namespace), client.MatchingLabels{virtv1.MigrationSelectorLabel: "slow"}); err != nil {
			return false, err
		}
		if len(list.Items) != 1 {
			return false, fmt.Errorf("%d migrations labelled %s=slow", len(list.Items), virtv1.MigrationSelectorLabel)
		}
		mig = list.Items[0]
		if mig.Status.Phase.IsFinal() {
			t.Fatalf("the migration ended (%s) before it could be cancelled: is bandwidthPerMigration honoured?", mig.Status.Phase)
		}
		return mig.Status.Phase == virtv1.MigrationRunning, fmt.Errorf("phase %s", mig.Status.Phase)
	})

	out, code := virtctl(t, f, "", "migrate-cancel", "slow")
	if code != 0 || !strings.Contains(out, "VM slow was scheduled to migrate-cancel (migration "+mig.Name+")") {
		t.Fatalf("virtctl migrate-cancel: exit %d, output:\n%s", code, out)
	}
	f.Eventually("the migration is gone and the guest runs where it ran", 2*time.Minute, func(ctx context.Context) (bool, error) {
		err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: mig.Name}, &virtv1.VirtualMachineInstanceMigration{})
		vmi := getVMI(t, f, "slow")
		ms := vmi.Status.MigrationState
		done := apierrors.IsNotFound(err) && vmi.UID == before.UID && vmi.Status.Phase == virtv1.Running &&
			vmi.Status.NodeName == far && ms != nil && ms.AbortStatus == virtv1.MigrationAbortSucceeded
		return done, fmt.Errorf("migration: %v; instance %s on %s, %s, migration state %+v", err, vmi.UID, vmi.Status.NodeName, vmi.Status.Phase, ms)
	})
	out, code = virtctl(t, f, "", "migrate-cancel", "slow")
	if code != 1 || !strings.Contains(out, "vmi/slow has no migration in progress to cancel") {
		t.Fatalf("migrate-cancel with nothing to cancel: exit %d, output:\n%s", code, out)
	}
}

// setMigrationBandwidth sets the cluster's bandwidthPerMigration (the KubeVirt object) for the test.
func setMigrationBandwidth(t *testing.T, q string) {
	t.Helper()
	out, err := exec.Command(kubectl(t), "-n", "podvirt", "get", "kubevirt", "kubevirt", "-o", "jsonpath={.spec.configuration.migrations.bandwidthPerMigration}").Output()
	if err != nil {
		t.Fatalf("read the KubeVirt object: %v", err)
	}
	was := "null"
	if v := strings.TrimSpace(string(out)); v != "" {
		was = `"` + v + `"`
	}
	patch := func(v string) []string {
		return []string{"-n", "podvirt", "patch", "kubevirt", "kubevirt", "--type", "merge", "-p",
			`{"spec":{"configuration":{"migrations":{"bandwidthPerMigration":` + v + `}}}}`}
	}
	runKubectl(t, patch(`"`+q+`"`)...)
	t.Cleanup(func() { runKubectl(t, patch(was)...) })
}

func getVMI(t *testing.T, f *framework.Framework, name string) *virtv1.VirtualMachineInstance {
	t.Helper()
	vmi := &virtv1.VirtualMachineInstance{}
	if err := f.Client.Get(f.Context(), client.ObjectKey{Namespace: f.Namespace, Name: name}, vmi); err != nil {
		t.Fatalf("get instance %s: %v", name, err)
	}
	return vmi
}

// kubectl drain of the node of a VM whose evictionStrategy is LiveMigrate: the launcher Pod's
// eviction is refused (drain retries) while the instance live-migrates to the other node, then the
// completed source Pod is evicted and the drain ends; the same instance runs on, its clock never
// reset.
func TestDrainMigratesTheVM(t *testing.T) {
	f := framework.New(t)
	requireVirtAPI(f)
	far, host := otherNode(t, f), f.HostNode()
	before := runOnNode(t, f, "evacuee", far, ptr.To(virtv1.EvictionStrategyLiveMigrate))
	upBefore := waitUptime(t, f, before)

	took := drain(t, f, far, 4*time.Minute)
	t.Logf("kubectl drain with a LiveMigrate VM: %s", took.Round(time.Millisecond))
	after := getVMI(t, f, "evacuee")
	if after.UID != before.UID || after.Status.NodeName != host || after.Status.EvacuationNodeName != "" {
		t.Fatalf("after the drain: instance %s on %q (evacuation mark %q); want %s on %q, unmarked",
			after.UID, after.Status.NodeName, after.Status.EvacuationNodeName, before.UID, host)
	}
	f.Eventually("the instance reports its new address", time.Minute, func(ctx context.Context) (bool, error) {
		after = getVMI(t, f, "evacuee")
		return len(after.Status.Interfaces) > 0 && after.Status.Interfaces[0].IP != before.Status.Interfaces[0].IP, fmt.Errorf("interfaces %+v", after.Status.Interfaces)
	})
	if up := waitUptime(t, f, after); up < upBefore {
		t.Fatalf("guest uptime %.1f s after the drain, %.1f s before: the guest rebooted", up, upBefore)
	}
}

// outage follows a migrating guest's web server from outside every 10 ms: first at the source
// Pod's address, then also at the target Pod's once the instance names it. gap is the longest time
// between two answers, i.e. how long the guest was unreachable (its downtime plus the
// hand-over of the address, as a client sees it).
type outage struct {
	mu      sync.Mutex
	last    time.Time
	gap     time.Duration
	answers int
	stop    context.CancelFunc
	done    chan struct{}
}

func probeOutage(t *testing.T, f *framework.Framework, name, sourceIP string) *outage {
	ctx, cancel := context.WithCancel(f.Context())
	o := &outage{stop: cancel, done: make(chan struct{})}
	c := &http.Client{Timeout: 500 * time.Millisecond}
	answers := func(ip string) bool {
		resp, err := c.Get("http://" + ip + "/")
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	go func() {
		defer close(o.done)
		ips := []string{sourceIP}
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			if len(ips) == 1 && n%10 == 0 { // look for the target Pod's address every 100 ms
				vmi := &virtv1.VirtualMachineInstance{}
				pod := &corev1.Pod{}
				if f.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: name}, vmi) == nil && vmi.Status.MigrationState != nil &&
					f.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: vmi.Status.MigrationState.TargetPod}, pod) == nil && pod.Status.PodIP != "" {
					ips = append(ips, pod.Status.PodIP)
				}
			}
			for _, ip := range ips {
				if answers(ip) {
					now := time.Now()
					o.mu.Lock()
					if !o.last.IsZero() {
						o.gap = max(o.gap, now.Sub(o.last))
					}
					o.last, o.answers = now, o.answers+1
					o.mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-o.done })
	return o
}

// end stops probing and returns the longest gap between answers and how many there were.
func (o *outage) end() (time.Duration, int) {
	o.stop()
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gap, o.answers
}
