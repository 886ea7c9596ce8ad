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
	renewal, previous string
	at                time.Time
}

// see records lease's renewal as observed at now, and returns when it was first seen as it is. The
// renewal before the last one is not taken for a new one: a cache that lags behind an uncached read
// must not move the sighting back and forth.
func (s *sightings) see(lease, renewal string, now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[string]sighting{}
	}
	old, ok := s.last[lease]
	if ok && (old.renewal == renewal || old.previous == renewal) {
		return old.at
	}
	s.last[lease] = sighting{renewal: renewal, previous: old.renewal, at: now}
	return now
}

// forget drops a deleted lease.
func (s *sightings) forget(lease string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.last, lease)
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
