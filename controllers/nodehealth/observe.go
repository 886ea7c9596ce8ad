package nodehealth

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
)

// sightings remembers, per lease, the renewal this controller last saw and when it saw it change,
// by its own clock (heartbeatv1.Stale). It starts empty: after a restart every lease is new, so
// every node gets a full threshold.
type sightings struct {
	mu   sync.Mutex
	last map[string]sighting
}

type sighting struct {
	renewal, previous string
	at                time.Time
	// gapEnded: when a renewal was seen more than heartbeatv1.LapseGap after the one before.
	gapEnded time.Time
	// confirmed is the lease's heartbeatv1.AnnotationConfirmed, marked when it was seen to change
	// (or the lease first seen); peers its heartbeatv1.AnnotationPeers.
	confirmed string
	marked    time.Time
	peers     int
	answers   bool
}

// see records lease's renewal and marks as observed at now, and returns when the renewal was first
// seen as it is. The renewal before the last one is not taken for a new one: a cache that lags
// behind an uncached read must not move the sighting back and forth.
func (s *sightings) see(lease *coordinationv1.Lease, now time.Time) time.Time {
	renewal := heartbeatv1.Renewal(lease)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[string]sighting{}
	}
	old, ok := s.last[lease.Name]
	cur := old
	if !ok || old.renewal != renewal && old.previous != renewal {
		cur.renewal, cur.previous, cur.at = renewal, old.renewal, now
		if ok && now.Sub(old.at) > heartbeatv1.LapseGap {
			cur.gapEnded = now
		}
	}
	if c := lease.Annotations[heartbeatv1.AnnotationConfirmed]; !ok || c != old.confirmed {
		cur.confirmed, cur.marked = c, now
	}
	cur.peers = heartbeatv1.Peers(lease)
	cur.answers = lease.Annotations[heartbeatv1.AnnotationAddress] != ""
	s.last[lease.Name] = cur
	return cur.at
}

// view is what was seen of one lease, for heartbeatv1.FailoverBlocked.
func (s *sightings) view(lease string) heartbeatv1.Sighting {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.last[lease]
	return heartbeatv1.Sighting{Node: strings.TrimPrefix(lease, heartbeatv1.LeasePrefix), Changed: l.at, GapEnded: l.gapEnded, Marked: l.marked, Peers: l.peers, Answers: l.answers}
}

// forget drops a deleted lease's sighting once its agent can no longer keep a guest running on a
// peer's behalf (heartbeatv1.ConfirmHorizon after its last renewal was seen); until then it counts
// among the others (a Node deleted while cut off takes its lease with it, not its agent's answers).
// A restart of this controller forgets it at once.
func (s *sightings) forget(lease string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.last[lease]; ok && now.Sub(l.at) > heartbeatv1.ConfirmHorizon {
		delete(s.last, lease)
	}
}

// others is what was seen of every agent lease but node's: the listed ones and the deleted ones
// still within heartbeatv1.ConfirmHorizon (older ones are forgotten).
func (s *sightings) others(node string, listed map[string]bool, now time.Time) []heartbeatv1.Sighting {
	s.mu.Lock()
	var names []string
	for name, l := range s.last {
		switch {
		case name == node:
		case listed[name]:
			names = append(names, name)
		case now.Sub(l.at) > heartbeatv1.ConfirmHorizon:
			delete(s.last, name)
		default:
			names = append(names, name)
		}
	}
	s.mu.Unlock()
	sort.Strings(names)
	views := make([]heartbeatv1.Sighting, 0, len(names))
	for _, name := range names {
		views = append(views, s.view(name))
	}
	return views
}

// Contact probes the control plane every ProbeInterval with an uncached read and records when the
// current run of contact began: after ProbeFailures probes in a row fail, a new run begins at the
// next success (one slow probe under load is not an outage). Heartbeats are not judged across a time
// this controller could not see them (a lost contact only ever delays a failover, the safe direction).
type Contact struct {
	// Reader reads uncached (the manager's API reader).
	Reader client.Reader
	// Namespace holds the leases the probe lists (one at most).
	Namespace string
	// Clock tells the time.
	Clock clock.PassiveClock

	mu       sync.Mutex
	since    time.Time // zero: no contact now
	failures int       // probes failed in a row
}

// ProbeInterval is how often Contact probes; each probe is bounded by it too. ProbeFailures probes
// failed in a row count as lost contact.
const (
	ProbeInterval = 2 * time.Second
	ProbeFailures = 3
)

// Start probes until ctx ends (a manager Runnable, on every replica).
func (c *Contact) Start(ctx context.Context) error {
	tick := time.NewTicker(ProbeInterval)
	defer tick.Stop()
	for {
		c.probe(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// NeedLeaderElection is false: a standby replica keeps its view of the contact too.
func (c *Contact) NeedLeaderElection() bool { return false }

func (c *Contact) probe(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, ProbeInterval)
	defer cancel()
	err := c.Reader.List(ctx, &coordinationv1.LeaseList{}, client.InNamespace(c.Namespace), client.Limit(1))
	c.record(err == nil, c.Clock.Now())
}

// record notes a probe's outcome at now.
func (c *Contact) record(ok bool, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !ok:
		if c.failures++; c.failures >= ProbeFailures {
			c.since = time.Time{}
		}
	case c.since.IsZero():
		c.since, c.failures = now, 0
	default:
		c.failures = 0
	}
}

// Since is when the current run of contact began, and whether there is contact at all now.
func (c *Contact) Since() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.since, !c.since.IsZero()
}
