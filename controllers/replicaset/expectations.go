package replicaset

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// expectationTTL bounds how long the controller waits for its cache to show its own writes.
const expectationTTL = time.Minute

// expectations remembers, per replica set, the instances this controller created or deleted and
// its cache has not shown yet. Acting again before the cache caught up would create or delete
// twice; so a replica set with pending expectations is left alone until its watch events arrive.
type expectations struct {
	mu      sync.Mutex
	pending map[types.NamespacedName]*pending
}

type pending struct {
	creates, deletes sets.Set[string]
	since            time.Time
}

func newExpectations() *expectations {
	return &expectations{pending: map[types.NamespacedName]*pending{}}
}

// expect records names created and deleted in this pass.
func (e *expectations) expect(rs types.NamespacedName, created, deleted []string, now time.Time) {
	if len(created) == 0 && len(deleted) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pending[rs] = &pending{creates: sets.New(created...), deletes: sets.New(deleted...), since: now}
}

// satisfied reports whether the cache shows every earlier write: created names present, deleted
// names absent (or marked deleting). Expectations older than expectationTTL count as satisfied.
func (e *expectations) satisfied(rs types.NamespacedName, present func(name string) bool, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.pending[rs]
	if !ok {
		return true
	}
	if now.Sub(p.since) > expectationTTL {
		delete(e.pending, rs)
		return true
	}
	for name := range p.creates {
		if !present(name) {
			return false
		}
	}
	for name := range p.deletes {
		if present(name) {
			return false
		}
	}
	delete(e.pending, rs)
	return true
}

// forget drops the expectations of a deleted replica set.
func (e *expectations) forget(rs types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pending, rs)
}
