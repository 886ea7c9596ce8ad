//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/controllers/nodehealth"
	"github.com/podvirt/podvirt/tests/framework"
)

// agentAway is how long TestGuestsOutliveTheirAgent keeps the second node's agent away: past the
// launchers' 40 s limit and virt-controller's 80 s threshold. PODVIRT_E2E_AGENT_AWAY sets another
// length (make chaos: 10 minutes).
func agentAway(t *testing.T) time.Duration {
	return envDuration(t, "PODVIRT_E2E_AGENT_AWAY", 2*time.Minute, 100*time.Second, time.Hour)
}

// A node agent away for minutes — its DaemonSet no longer runs it on the second node, as in a
// rollout that hangs — stops no guest and fails nothing over (rule 3 of docs/node-loss.md): its
// launcher asks virt-api for the node's kubelet lease, sees it renewed and keeps its guest, and
// virt-controller, seeing the same kubelet lease fresh, waits and says why. When the agent is back
// it adopts the guest: the same instance, its guest never restarted, never 0 and never 2 qemus.
func TestGuestsOutliveTheirAgent(t *testing.T) {
	f := framework.New(t)
	requireVirtAPI(f)
	away := agentAway(t)
	far := otherNode(t, f)
	vmi := runOnNode(t, f, "loyal", far, nil)
	before := waitUptime(t, f, vmi)
	counter := countGuests(t, f.Namespace, vmi.Name)

	keepAgentOff(t, f, far)
	gone := time.Now()
	unanswered, samples := 0, 0
	err := wait.PollUntilContextTimeout(f.Context(), 5*time.Second, away, true, func(ctx context.Context) (bool, error) {
		samples++
		if _, err := guestUptime(ctx, vmi); err != nil {
			unanswered++
		}
		now := &virtv1.VirtualMachineInstance{}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(vmi), now); err != nil {
			return false, err
		}
		if now.UID != vmi.UID || now.Status.Phase != virtv1.Running {
			return false, fmt.Errorf("%s after its agent was away %s: instance %s in phase %s (%s), want %s Running",
				vmi.Name, time.Since(gone).Round(time.Second), now.UID, now.Status.Phase, now.Status.Reason, vmi.UID)
		}
		return false, nil
	})
	if !wait.Interrupted(err) {
		t.Fatal(err)
	}
	t.Logf("node agent of %s away for %s; guest sampled %d times, unanswered %d", far, time.Since(gone).Round(time.Second), samples, unanswered)
	expectFailoverBlockedByKubelet(t, f, far)
	letAgentBack(f.Context(), t, f, far)

	up, err := guestUptime(f.Context(), vmi)
	switch {
	case err != nil:
		t.Errorf("the guest does not answer after its agent came back: %v", err)
	case up < before+away.Seconds():
		t.Errorf("guest uptime %.0f s, was %.0f s before the agent went: it restarted", up, before)
	}
	if most := counter.stop(); most != 1 || !counter.gone.IsZero() {
		t.Errorf("at most %d guests at once (want 1), gone at %v (want never)", most, counter.gone)
	}
	if unanswered > 1 { // a sample may fall on a slow answer
		t.Errorf("the guest did not answer %d of %d samples while its agent was away", unanswered, samples)
	}
	// The agent adopted it: virt-api reaches the guest through it again.
	f.Eventually("virtctl pause through the agent that came back", time.Minute, func(context.Context) (bool, error) {
		out, code := virtctl(t, f, "", "pause", "vmi", vmi.Name)
		return code == 0, fmt.Errorf("exit %d: %s", code, out)
	})
	if out, code := virtctl(t, f, "", "unpause", "vmi", vmi.Name); code != 0 {
		t.Errorf("virtctl unpause: exit %d: %s", code, out)
	}
}

// keepAgentOff makes the node agent's DaemonSet leave node (a required node affinity; the DaemonSet
// rolls its other Pods) and waits until no agent Pod runs there; the affinity is removed at cleanup
// if the test has not let the agent back.
func keepAgentOff(t *testing.T, f *framework.Framework, node string) {
	t.Helper()
	ctx := f.Context()
	ds := agentDaemonSet(ctx, t, f)
	orig := ds.DeepCopy()
	ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpNotIn, Values: []string{node}}},
		}}},
	}}
	if err := f.Client.Patch(ctx, ds, client.MergeFrom(orig)); err != nil {
		t.Fatalf("keep the node agent off %s: %v", node, err)
	}
	t.Cleanup(func() { // the test's context is over by now
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		if agentDaemonSet(ctx, t, f).Spec.Template.Spec.Affinity != nil {
			letAgentBack(ctx, t, f, node)
		}
	})
	f.Eventually("no node agent Pod on "+node, 2*time.Minute, func(ctx context.Context) (bool, error) {
		n, _, err := agentPodsOn(ctx, f, node)
		return n == 0, err
	})
}

// letAgentBack removes the affinity and waits (within ctx) for a Ready agent on node.
func letAgentBack(ctx context.Context, t *testing.T, f *framework.Framework, node string) {
	t.Helper()
	ds := agentDaemonSet(ctx, t, f)
	orig := ds.DeepCopy()
	ds.Spec.Template.Spec.Affinity = nil
	if err := f.Client.Patch(ctx, ds, client.MergeFrom(orig)); err != nil {
		t.Fatalf("let the node agent back on %s: %v", node, err)
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var ready bool
		_, ready, last = agentPodsOn(ctx, f, node)
		return ready, nil
	})
	if err != nil {
		t.Fatalf("no Ready node agent on %s: %v (%v)", node, err, last)
	}
}

func agentDaemonSet(ctx context.Context, t *testing.T, f *framework.Framework) *appsv1.DaemonSet {
	t.Helper()
	ds := &appsv1.DaemonSet{}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: heartbeatv1.Namespace, Name: "virt-handler"}, ds); err != nil {
		t.Fatalf("the node agent's DaemonSet: %v", err)
	}
	return ds
}

// agentPodsOn counts the node agent's Pods on node, and whether one of them is Ready.
func agentPodsOn(ctx context.Context, f *framework.Framework, node string) (int, bool, error) {
	pods := &corev1.PodList{}
	if err := f.Client.List(ctx, pods, client.InNamespace(heartbeatv1.Namespace), client.MatchingLabels{"app.kubernetes.io/name": "virt-handler"}); err != nil {
		return 0, false, err
	}
	n, ready := 0, false
	for _, p := range pods.Items {
		if p.Spec.NodeName != node {
			continue
		}
		n++
		for _, c := range p.Status.Conditions {
			ready = ready || p.DeletionTimestamp == nil && c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		}
	}
	return n, ready, nil
}

// expectFailoverBlockedByKubelet finds virt-controller's Event saying that node's stale agent is
// not failed over because its kubelet still renews its lease.
func expectFailoverBlockedByKubelet(t *testing.T, f *framework.Framework, node string) {
	t.Helper()
	events := &corev1.EventList{}
	if err := f.Client.List(f.Context(), events, client.InNamespace(heartbeatv1.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == nodehealth.ReasonFailoverBlocked && e.InvolvedObject.Name == heartbeatv1.LeaseName(node) &&
			strings.Contains(e.Message, "kubelet of node "+node+" still renews") {
			return
		}
	}
	t.Errorf("no %s Event on %s saying the kubelet still renews", nodehealth.ReasonFailoverBlocked, heartbeatv1.LeaseName(node))
}
