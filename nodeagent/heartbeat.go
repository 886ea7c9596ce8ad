package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
)

// Heartbeat renews the node's heartbeat Lease (heartbeatv1.LeaseName(NodeName) in Namespace) every
// Interval while the agent runs. It is a controller-runtime Runnable; Check is a readiness check that
// fails while the heartbeat is not being renewed.
type Heartbeat struct {
	// Client reads and writes Leases without a cache; it also reads the Node (the Lease's owner, so
	// that deleting the Node deletes its Lease). Setup gives it the heartbeat's own client.
	Client    client.Client
	Namespace string
	NodeName  string
	// Holder is the agent's Pod name.
	Holder string
	// Interval between renewals (heartbeatv1.RenewInterval).
	Interval time.Duration
	// Clock tells the time; the real clock when nil.
	Clock clock.PassiveClock

	mu      sync.Mutex
	renewed time.Time
}

// NeedLeaderElection is false: every node agent renews its own node's lease.
func (h *Heartbeat) NeedLeaderElection() bool { return false }

// Start renews the lease at once and then every Interval until ctx ends. A failed renewal is logged
// and retried at the next tick: the controllers judge staleness, not the agent.
func (h *Heartbeat) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("heartbeat").WithValues("lease", heartbeatv1.LeaseName(h.NodeName), "namespace", h.Namespace)
	tick := time.NewTicker(h.Interval)
	defer tick.Stop()
	for {
		if err := h.renew(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Renewing the heartbeat lease")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Check is a healthz.Checker: ready once the lease was renewed within the lease duration.
func (h *Heartbeat) Check(_ *http.Request) error {
	h.mu.Lock()
	last := h.renewed
	h.mu.Unlock()
	switch {
	case last.IsZero():
		return errors.New("heartbeat lease not renewed yet")
	case h.Clock.Now().Sub(last) > heartbeatv1.LeaseDuration:
		return fmt.Errorf("heartbeat lease last renewed %s ago", h.Clock.Now().Sub(last).Round(time.Second))
	}
	return nil
}

// Fresh reports whether the lease was renewed within heartbeatv1.VouchLimit: only then does the agent
// talk to its launchers (see there).
func (h *Heartbeat) Fresh() bool {
	h.mu.Lock()
	last := h.renewed
	h.mu.Unlock()
	return !last.IsZero() && h.Clock.Now().Sub(last) <= heartbeatv1.VouchLimit
}

// renew creates the lease or moves its renewTime (with the lease's resourceVersion: a concurrent
// writer makes this renewal fail and the next one succeed).
func (h *Heartbeat) renew(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, h.Interval) // a renewal never outlives the next one's turn
	defer cancel()
	now := metav1.NewMicroTime(h.Clock.Now())
	key := client.ObjectKey{Namespace: h.Namespace, Name: heartbeatv1.LeaseName(h.NodeName)}
	lease := &coordinationv1.Lease{}
	err := h.Client.Get(ctx, key, lease)
	switch {
	case apierrors.IsNotFound(err):
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, OwnerReferences: h.nodeOwner(ctx)},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(h.Holder),
				LeaseDurationSeconds: ptr.To(int32(heartbeatv1.LeaseDuration / time.Second)),
				AcquireTime:          &now,
				RenewTime:            &now,
			},
		}
		if err := h.Client.Create(ctx, lease); err != nil {
			return fmt.Errorf("create heartbeat lease: %w", err)
		}
	case err != nil:
		return fmt.Errorf("get heartbeat lease: %w", err)
	default:
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != h.Holder {
			lease.Spec.HolderIdentity = ptr.To(h.Holder)
			lease.Spec.AcquireTime = &now
			lease.Spec.LeaseTransitions = ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)
		}
		lease.Spec.LeaseDurationSeconds = ptr.To(int32(heartbeatv1.LeaseDuration / time.Second))
		lease.Spec.RenewTime = &now
		if err := h.Client.Update(ctx, lease); err != nil {
			return fmt.Errorf("renew heartbeat lease: %w", err)
		}
	}
	h.mu.Lock()
	h.renewed = now.Time
	h.mu.Unlock()
	return nil
}

// nodeOwner makes the Node own its lease, when the Node can be read.
func (h *Heartbeat) nodeOwner(ctx context.Context) []metav1.OwnerReference {
	node := &corev1.Node{}
	if err := h.Client.Get(ctx, client.ObjectKey{Name: h.NodeName}, node); err != nil {
		log.FromContext(ctx).Info("Heartbeat lease gets no owner: cannot read the Node", "node", h.NodeName, "error", err.Error())
		return nil
	}
	return []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
}
