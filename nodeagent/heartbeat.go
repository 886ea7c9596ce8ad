package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
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
// Interval while the agent runs, and tells whether the agent vouches for its launchers (Vouching):
// while its renewals succeed, while a peer agent says it cannot reach the control plane either
// (an outage, not this node's isolation: peers.go), or when it has no peers at all. It is a
// controller-runtime Runnable; Check is a readiness check that fails while the heartbeat is not
// being renewed.
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
	// Address is where this agent answers its peers (heartbeatv1.AnnotationAddress); "": nowhere.
	Address string
	// Ask asks a peer's agent whether it is cut off from the control plane too; nil: no peer is
	// ever asked (the agent vouches only while it renews, or when it has no peers).
	Ask func(ctx context.Context, p Peer) (bool, error)

	mu      sync.Mutex
	renewed time.Time
	// peers are the other agents whose count the last successful renewal wrote (listed: one has
	// written a count since the start); pending is a newer list not written yet.
	peers     []Peer
	listed    bool
	pending   []Peer
	pendingOK bool
	// rounds counts renewals since the start (the peers are listed every listEvery rounds).
	rounds int
	// confirmed is when a peer that answered "cut off too" was asked.
	confirmed time.Time
	// answered counts this agent's "cut off" answers, marked how many of them a renewal has marked on
	// the lease (the first renewal after a start marks too: answers given before it are forgotten).
	answered, marked uint64
}

// listEvery is how many renewals apart the agent lists its peers (about once a minute: every agent
// lists every lease).
const listEvery = 6

// NeedLeaderElection is false: every node agent renews its own node's lease.
func (h *Heartbeat) NeedLeaderElection() bool { return false }

// Start renews the lease at once and then every Interval until ctx ends, and asks the peers while
// renewals fail (askPeers). A failed renewal is logged and retried at the next tick: the
// controllers judge staleness, not the agent.
func (h *Heartbeat) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("heartbeat").WithValues("lease", heartbeatv1.LeaseName(h.NodeName), "namespace", h.Namespace)
	ctx = log.IntoContext(ctx, logger)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { h.askPeers(ctx) })
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

// Vouching reports whether the agent talks to its launchers (which fence their guests when it falls
// silent): while its lease was renewed within heartbeatv1.VouchLimit, while a peer asked within
// heartbeatv1.ConfirmValidity said it cannot reach the control plane either, or while the last
// renewal listed no peer (and wrote so on the lease: virt-controller then fails nothing over).
func (h *Heartbeat) Vouching() bool {
	vouching, _ := h.Vouch()
	return vouching
}

// Vouch is Vouching and, read at the same instant, when it ends as things stand (on Clock); a zero
// end: none is known (the agent vouches alone, with no peer to fail its node over to).
func (h *Heartbeat) Vouch() (bool, time.Time) {
	now := h.Clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.renewed.IsZero() {
		return h.listed && len(h.peers) == 0, time.Time{}
	}
	until := h.renewed.Add(heartbeatv1.VouchLimit)
	if !h.confirmed.IsZero() && now.Sub(h.renewed) <= heartbeatv1.MaxLapse {
		c := h.confirmed.Add(heartbeatv1.ConfirmValidity)
		if last := h.renewed.Add(heartbeatv1.MaxLapse); c.After(last) {
			c = last
		}
		if c.After(until) {
			until = c
		}
	}
	switch {
	case h.listed && len(h.peers) == 0:
		return true, time.Time{}
	case now.After(until):
		return false, time.Time{}
	}
	return true, until
}

// renew renews the lease (renewLease), then lists the peers when a list is due (at the start and
// every listEvery renewals, each list bounded by listTimeout): the next renewal writes their count.
func (h *Heartbeat) renew(ctx context.Context) error {
	err := h.renewLease(ctx)
	h.mu.Lock()
	due := !h.listed && !h.pendingOK || h.rounds%listEvery == 0
	h.rounds++
	h.mu.Unlock()
	if due {
		lctx, cancel := context.WithTimeout(ctx, listTimeout)
		defer cancel()
		peers, lerr := h.listPeers(lctx)
		if lerr != nil {
			log.FromContext(ctx).Info("Cannot list the peer agents; keeping the last list", "error", lerr.Error())
		} else {
			h.mu.Lock()
			h.pending, h.pendingOK = peers, true
			h.mu.Unlock()
		}
	}
	return err
}

// listTimeout bounds the list of the peers' leases.
const listTimeout = 5 * time.Second

// renewLease creates the lease or moves its renewTime (with the lease's resourceVersion: a
// concurrent writer makes this renewal fail and the next one succeed), writing the peers' count of
// the newest list and a mark when one is owed.
func (h *Heartbeat) renewLease(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, h.Interval) // a renewal never outlives the next one's turn
	defer cancel()
	now := metav1.NewMicroTime(h.Clock.Now())
	h.mu.Lock()
	peers, listed, fromList := h.peers, h.listed, h.pendingOK
	if fromList {
		peers, listed = h.pending, true
	}
	if listed && len(peers) > 0 { // a write whose outcome is lost may say it has peers: not alone from now on
		h.peers, h.listed = peers, true
	}
	// The first renewal after a start marks (answers before it are forgotten), and so does one that
	// may answer while in flight.
	answered, mark := h.answered, h.answered > h.marked || h.renewed.IsZero() || now.Sub(h.renewed) > heartbeatv1.MarkAfter
	h.mu.Unlock()
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
		h.annotate(lease, peers, listed, mark)
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
		if len(lease.OwnerReferences) == 0 { // the Node could not be read when it was created: a lease outliving its Node holds failovers back
			lease.OwnerReferences = h.nodeOwner(ctx)
		}
		lease.Spec.LeaseDurationSeconds = ptr.To(int32(heartbeatv1.LeaseDuration / time.Second))
		lease.Spec.RenewTime = &now
		h.annotate(lease, peers, listed, mark)
		if err := h.Client.Update(ctx, lease); err != nil {
			return fmt.Errorf("renew heartbeat lease: %w", err)
		}
	}
	h.mu.Lock()
	h.renewed = now.Time
	h.peers, h.listed = peers, listed // vouching alone only on what the lease now says
	if fromList {
		h.pendingOK = false
	}
	h.marked = max(h.marked, answered)
	h.mu.Unlock()
	return nil
}

// annotate writes the peers' count (when a list succeeded), this agent's address and, when mark,
// one more confirmation mark onto lease.
func (h *Heartbeat) annotate(lease *coordinationv1.Lease, peers []Peer, listed, mark bool) {
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	if listed {
		lease.Annotations[heartbeatv1.AnnotationPeers] = strconv.Itoa(len(peers))
	} else { // not known yet: an earlier "0" must not stop the controllers failing this node over
		delete(lease.Annotations, heartbeatv1.AnnotationPeers)
	}
	if h.Address != "" {
		lease.Annotations[heartbeatv1.AnnotationAddress] = h.Address
	}
	if mark {
		n, _ := strconv.ParseUint(lease.Annotations[heartbeatv1.AnnotationConfirmed], 10, 64) // garbled: starts again, still a change
		lease.Annotations[heartbeatv1.AnnotationConfirmed] = strconv.FormatUint(n+1, 10)
	}
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
