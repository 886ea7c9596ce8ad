// Package v1 (imported as heartbeatv1) is the node agent's heartbeat contract: a coordination.k8s.io/v1
// Lease per node that the agent renews while it runs, and the project's default namespace. The controllers import it to find a node's lease and to decide whether the
// node agent there is still alive (VMIs on a node whose lease went stale are failed with reason
// NodeUnresponsive). It is pure: names, durations and a staleness check, no client.
package v1

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

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

// LastRenewed is when the lease was last renewed (or acquired, if never renewed); zero if neither is set.
func LastRenewed(lease *coordinationv1.Lease) time.Time {
	switch {
	case lease.Spec.RenewTime != nil:
		return lease.Spec.RenewTime.Time
	case lease.Spec.AcquireTime != nil:
		return lease.Spec.AcquireTime.Time
	default:
		return time.Time{}
	}
}

// Stale reports whether the lease was not renewed within threshold before now. A lease without any
// renewal time is stale. Controllers typically use LeaseDuration as the threshold.
func Stale(lease *coordinationv1.Lease, now time.Time, threshold time.Duration) bool {
	last := LastRenewed(lease)
	return last.IsZero() || now.Sub(last) > threshold
}
