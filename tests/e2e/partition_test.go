//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// partitionLength is how long the partition test keeps the node cut off ($PODVIRT_E2E_PARTITION,
// 3 minutes by default: past the VM's failover with room to spare).
func partitionLength(t *testing.T) time.Duration {
	return envDuration(t, "PODVIRT_E2E_PARTITION", 3*time.Minute, 2*time.Minute, 30*time.Minute)
}

// A node cut off the network — its link on the cluster bridge down, while its kubelet, agent and
// guest keep running — is isolation, not an outage: its agent cannot renew and its peer, which
// reaches the control plane, cannot be asked, so no one confirms an outage and the agent stops
// vouching; the launcher fences its guest, and only then does virt-controller (seeing the other
// agent renew all along) fail the instance over. The VM runs again on the other node while the
// partition lasts, never two guests at once (sampled every 100 ms), and once the node is back
// nothing of the old instance returns.
func TestCutOffNodeFencesBeforeTheVMRunsElsewhere(t *testing.T) {
	f := framework.New(t)
	requireVirtAPI(f)
	partition := partitionLength(t)
	far, host := otherNode(t, f), f.HostNode()
	// virt-api serves the admission webhooks every new instance passes, virt-controller fails the
	// instance over: neither may be cut off with the node.
	moveDeploymentsOff(t, f, far)
	first := runOnNode(t, f, "islander", far, nil)
	waitUptime(t, f, first)

	guests := countGuests(t, f.Namespace, "islander")
	t.Cleanup(func() { restoreNodes(t, f) }) // up brings the node's link up too
	podvirtCluster(t, "cut-node", far)
	cut := time.Now()

	// The documented bound: the heartbeat threshold (80 s) after the last renewal, plus a start.
	second := waitFailedOver(t, f, first, 3*time.Minute)
	back := time.Since(cut)
	if second.Status.NodeName != host {
		t.Errorf("the VM came back on %q, want %q", second.Status.NodeName, host)
	}
	// The partition goes on: the new instance keeps running, and the old guest stays gone.
	rest := time.Until(cut.Add(partition))
	if rest < 20*time.Second {
		t.Fatalf("the VM ran elsewhere %s after the cut: too late to watch it through a %s partition", back.Round(time.Second), partition)
	}
	err := wait.PollUntilContextTimeout(f.Context(), 5*time.Second, rest, true, func(ctx context.Context) (bool, error) {
		now := &virtv1.VirtualMachineInstance{}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(second), now); err != nil {
			return false, err
		}
		if now.UID != second.UID || now.Status.Phase != virtv1.Running {
			return false, fmt.Errorf("while the node is cut off: instance %s in phase %s, want %s Running", now.UID, now.Status.Phase, second.UID)
		}
		return false, nil
	})
	if !wait.Interrupted(err) {
		t.Fatal(err)
	}
	podvirtCluster(t, "heal-node", far)
	restoreNodes(t, f) // the node Ready again, its agent too
	waitUptime(t, f, second)
	if most := guests.stop(); most != 1 || guests.gone.IsZero() {
		t.Errorf("at most %d guests of the VM ran at once, the first gone at %v: want exactly 1, and a moment with none (the fence)", most, guests.gone)
	}
	// The launcher fences within VouchLimit + AgentSilenceLimit + a poll of the agent's last renewal,
	// which was at most a renewal interval before the cut.
	if fence := heartbeatv1.VouchLimit + launcherv1.AgentSilenceLimit + heartbeatv1.RenewInterval + 5*time.Second; !guests.gone.IsZero() && guests.gone.Sub(cut) > fence {
		t.Errorf("the cut-off guest was fenced %s after the cut, want within %s", guests.gone.Sub(cut).Round(time.Second), fence)
	}
	t.Logf("node %s cut off for %s → its guest fenced after %s → the VM running on %s after %s; at most one guest at any time",
		far, partition.Round(time.Second), guests.gone.Sub(cut).Round(time.Second), second.Status.NodeName, back.Round(time.Second))

	expectNodeUnresponsive(t, f, first)
}
