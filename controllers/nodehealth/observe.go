package nodehealth

import (
	"context"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// sightings remembers, per lease, the renewal this controller last saw and when it saw it change,
// by its own clock (heartbeatv1.Stale). It starts empty: after a restart every lease is new, so
// every node gets a full threshold.
type sightings struct {
	mu   sync.Mutex
	last map[string]sighting
}

type sighting struct {
	renewal string
	at      time.Time
}

// see records lease's renewal as observed at now, and returns when it was first seen as it is.
func (s *sightings) see(lease, renewal string, now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[string]sighting{}
	}
	if old, ok := s.last[lease]; ok && old.renewal == renewal {
		return old.at
	}
	s.last[lease] = sighting{renewal: renewal, at: now}
	return now
}

// forget drops a deleted lease.
func (s *sightings) forget(lease string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.last, lease)
}

// Contact probes the control plane every ProbeInterval with an uncached read and records when the
// current run of uninterrupted contact began: after a failed probe a new run begins at the next
// success. Heartbeats are not judged across a time this controller could not see them (a failed
// probe only ever delays a failover, which is the safe direction).
type Contact struct {
	// Reader reads uncached (the manager's API reader).
	Reader client.Reader
	// Namespace holds the leases the probe lists (one at most).
	Namespace string
	// Clock tells the time.
	Clock clock.PassiveClock

	mu    sync.Mutex
	since time.Time // zero: no contact now
}

// ProbeInterval is how often Contact probes; each probe is bounded by it too.
const ProbeInterval = 2 * time.Second

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
		c.since = time.Time{}
	case c.since.IsZero():
		c.since = now
	}
}

// Since is when the current run of contact began, and whether there is contact at all now.
func (c *Contact) Since() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.since, !c.since.IsZero()
}
