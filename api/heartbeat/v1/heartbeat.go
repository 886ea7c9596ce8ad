// Package v1 (imported as heartbeatv1) is the node agent's heartbeat contract: a coordination.k8s.io/v1
// Lease per node that the agent renews while it runs, and the project's default namespace. The controllers import it to find a node's lease and to decide whether the
// node agent there is still alive (VMIs on a node whose lease went stale are failed with reason
// NodeUnresponsive). It is pure: names, durations and the staleness rule, no client.
package v1

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
)

const (
	// Namespace is the default namespace of the node agent and its leases.
	Namespace = "podvirt"
	// NamespaceEnv is the environment variable (set from the Pod's metadata.namespace) that overrides
	// Namespace for the agent.
	NamespaceEnv = "POD_NAMESPACE"
	// LeasePrefix starts every heartbeat lease's name; the node's name follows.
	LeasePrefix = "virt-handler-"
	// RenewInterval is how often the agent renews its lease.
	RenewInterval = 10 * time.Second
	// LeaseDuration is the leaseDurationSeconds the agent writes: four missed renewals.
	LeaseDuration = 40 * time.Second
	// VouchLimit is how old the agent's last successful renewal may be while it still talks to its
	// launchers (two missed renewals). An agent cut off from the control plane falls silent, so its
	// launchers fence their guests (launcherv1.AgentSilenceLimit) before the controllers, seeing the
	// lease go stale, start those VMs on another node.
	VouchLimit = 2 * RenewInterval
	// MinThreshold is the shortest staleness threshold after which the controllers may fail a node's
	// instances: the agent stops vouching VouchLimit after its last renewal, its launchers fence
	// their guests launcherv1.AgentSilenceLimit later, plus a margin for the launcher's check and
	// the guest's destruction.
	MinThreshold = VouchLimit + launcherv1.AgentSilenceLimit + 10*time.Second
)

// LeaseName is the name of the heartbeat lease of the node agent on node.
func LeaseName(node string) string { return LeasePrefix + node }

// Renewal identifies the lease's last renewal (its renew time, else its acquire time, as the agent
// wrote them, and the holder); "" if it was never renewed. The agent's clock is not to be compared
// with anyone else's: an observer judges a heartbeat by when it saw Renewal change (Stale).
func Renewal(lease *coordinationv1.Lease) string {
	var at *metav1.MicroTime
	switch {
	case lease.Spec.RenewTime != nil:
		at = lease.Spec.RenewTime
	case lease.Spec.AcquireTime != nil:
		at = lease.Spec.AcquireTime
	default:
		return ""
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	return holder + "@" + at.UTC().Format(time.RFC3339Nano)
}

// Stale is the staleness rule, judged by the observer's own clock: a heartbeat is stale when more
// than threshold has passed since the observer last saw its Renewal change (seen) and since the
// observer's own contact with the control plane last resumed (contactSince; zero: never lost). So
// clock skew between node and observer changes nothing, and after a control-plane outage or an
// observer's restart every node gets a full threshold to renew again.
func Stale(seen, contactSince, now time.Time, threshold time.Duration) bool {
	return now.Sub(JudgedFrom(seen, contactSince)) > threshold
}

// JudgedFrom is when Stale starts counting: the later of seen and contactSince.
func JudgedFrom(seen, contactSince time.Time) time.Time {
	if contactSince.After(seen) {
		return contactSince
	}
	return seen
}
