//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// controlPlaneOutage is how long TestGuestsOutliveAControlPlaneOutage keeps the kube-apiserver
// away: twice as long as it took, before the agents asked their peers, to stop every guest.
// PODVIRT_E2E_OUTAGE (a duration) sets another length.
func controlPlaneOutage(t *testing.T) time.Duration {
	return envDuration(t, "PODVIRT_E2E_OUTAGE", 2*time.Minute, time.Nanosecond, heartbeatv1.MaxLapse)
}

// envDuration is the duration the environment variable name sets for a test, def when unset; a
// value outside [least, most] fails the test naming the variable.
func envDuration(t *testing.T, name string, def, least, most time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < least || d > most {
		t.Fatalf("%s=%q: want a duration from %s to %s", name, v, least, most)
	}
	return d
}

// The kube-apiserver away for two minutes stops no guest: no agent can renew its heartbeat, each
// asks the other, both answer that they cannot reach the control plane either, and both keep
// vouching for their launchers. Once it is back no instance is failed over (virt-controller gives
// every node a full threshold, and the agents' marks hold failovers back): the same instances run
// on, their guests never restarted, and at no moment did a guest go or a second one appear.
func TestGuestsOutliveAControlPlaneOutage(t *testing.T) {
	f := framework.New(t)
	requireVirtAPI(f)
	outage := controlPlaneOutage(t)
	far, host := otherNode(t, f), f.HostNode()
	vmis := []*virtv1.VirtualMachineInstance{runOnNode(t, f, "steady", host, nil), runOnNode(t, f, "stoic", far, nil)}
	before := make([]float64, len(vmis))
	counters := make([]*guestCounter, len(vmis))
	for i, vmi := range vmis {
		before[i] = waitUptime(t, f, vmi)
		counters[i] = countGuests(t, f.Namespace, vmi.Name)
	}

	restored := false
	t.Cleanup(func() {
		if !restored {
			podvirtCluster(t, "up", "--nodes", strconv.Itoa(e2eNodes))
		}
	})
	podvirtCluster(t, "stop-apiserver")
	down := time.Now()
	// The guests answer on their network all along; nothing of the control plane does.
	unanswered := map[string]int{}
	samples := 0
	err := wait.PollUntilContextTimeout(f.Context(), 5*time.Second, outage, true, func(ctx context.Context) (bool, error) {
		samples++
		for _, vmi := range vmis {
			if _, err := guestUptime(ctx, vmi); err != nil {
				unanswered[vmi.Name]++
			}
		}
		return false, nil
	})
	if !wait.Interrupted(err) {
		t.Fatalf("sampling the guests: %v", err)
	}
	podvirtCluster(t, "up", "--nodes", strconv.Itoa(e2eNodes))
	restored = true
	t.Logf("kube-apiserver away for %s; guests sampled %d times, unanswered: %v", time.Since(down).Round(time.Second), samples, unanswered)

	// virt-controller lost its leader lease in the outage and exited; the kubelet's back-off could
	// keep it down for minutes: a new Pod starts it at once. Past its heartbeat threshold after it
	// is back, the same instances still run, and their guests have been up since before the outage.
	restartVirtController(t, f)
	back := time.Now()
	err = wait.PollUntilContextTimeout(f.Context(), 5*time.Second, 100*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, vmi := range vmis {
			now := &virtv1.VirtualMachineInstance{}
			if err := f.Client.Get(ctx, client.ObjectKeyFromObject(vmi), now); err != nil {
				return false, nil // the apiserver starting up
			}
			if now.UID != vmi.UID || now.Status.Phase != virtv1.Running {
				return false, fmt.Errorf("%s after the outage: instance %s in phase %s (%s), want %s Running", vmi.Name, now.UID, now.Status.Phase, now.Status.Reason, vmi.UID)
			}
		}
		return false, nil
	})
	if !wait.Interrupted(err) {
		t.Fatalf("%v (%s after the control plane came back)", err, time.Since(back).Round(time.Second))
	}
	for i, vmi := range vmis {
		up, err := guestUptime(f.Context(), vmi)
		if err != nil {
			t.Errorf("%s: the guest does not answer after the outage: %v", vmi.Name, err)
			continue
		}
		if up < before[i]+outage.Seconds() {
			t.Errorf("%s: guest uptime %.0f s, was %.0f s before the outage: it restarted", vmi.Name, up, before[i])
		}
		if most := counters[i].stop(); most != 1 || !counters[i].gone.IsZero() {
			t.Errorf("%s: at most %d guests at once (want 1), gone at %v (want never)", vmi.Name, most, counters[i].gone)
		}
	}
	for name, n := range unanswered {
		if n > 1 { // a sample may fall on a slow answer
			t.Errorf("%s: the guest did not answer %d of %d samples during the outage", name, n, samples)
		}
	}
}

// restartVirtController deletes virt-controller's Pods once the apiserver answers again and waits
// until a new one is Ready.
func restartVirtController(t *testing.T, f *framework.Framework) {
	t.Helper()
	sel := client.MatchingLabels{"app.kubernetes.io/name": "virt-controller"}
	old := map[string]bool{}
	f.Eventually("the apiserver answers; virt-controller's Pods deleted", 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		if err := f.Client.List(ctx, pods, client.InNamespace("podvirt"), sel); err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			old[p.Name] = true
			if err := f.Client.Delete(ctx, &p); client.IgnoreNotFound(err) != nil {
				return false, err
			}
		}
		return true, nil
	})
	f.Eventually("a new virt-controller Ready", 3*time.Minute, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		if err := f.Client.List(ctx, pods, client.InNamespace("podvirt"), sel); err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if !old[p.Name] && c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					return true, nil
				}
			}
		}
		return false, fmt.Errorf("%d Pods, none new and Ready", len(pods.Items))
	})
}
