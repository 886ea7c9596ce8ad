package statuspatch

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ownWriteMemory is how long a write is remembered: a cache is never that far behind, and an object
// deleted before its cache caught up must not be remembered for ever.
const ownWriteMemory = time.Minute

// OwnWrites remembers, per object, the resourceVersion each status write of one reconciler replaced.
// A pass that reads the object from a cache still holding that version has not seen its own last
// write: whatever it computes is stale and its status write would only lose the lock (and what it
// decides may already be done). Behind tells it to wait for the watch event of its write instead,
// without a requeue: at scale, requeues of objects whose writes the watch has not delivered yet
// would take CPU from the apiserver that is delivering them.
//
// Resource versions are opaque but a cache is monotone: once the version a write replaced is gone
// from the cache, the cache holds that write or a later version. The zero value is ready to use and
// safe for concurrent passes (of different objects; one object is never reconciled twice at once).
type OwnWrites struct {
	mu      sync.Mutex
	written map[types.UID]ownWrite
	swept   time.Time // when forgotten writes were last dropped
}

type ownWrite struct {
	replaced string // the resourceVersion the write was made against
	at       time.Time
}

// Write is statuspatch.Write that, when it wrote, remembers the version it replaced.
func (w *OwnWrites) Write(ctx context.Context, c client.Client, orig, obj client.Object, what string) (bool, error) {
	wrote, err := Write(ctx, c, orig, obj, what)
	if wrote && obj.GetResourceVersion() != orig.GetResourceVersion() { // a no-op patch has no watch event to wait for
		w.record(obj.GetUID(), orig.GetResourceVersion())
	}
	return wrote, err
}

// Behind reports whether obj, as read from the cache, is still the version this reconciler's last
// status write of it replaced. It forgets the write once the cache has moved past it.
func (w *OwnWrites) Behind(obj client.Object) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.written[obj.GetUID()]
	if !ok {
		return false
	}
	if last.replaced == obj.GetResourceVersion() && time.Since(last.at) < ownWriteMemory {
		return true
	}
	delete(w.written, obj.GetUID())
	return false
}

func (w *OwnWrites) record(uid types.UID, replaced string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.written == nil {
		w.written = map[types.UID]ownWrite{}
	}
	now := time.Now()
	if now.Sub(w.swept) >= ownWriteMemory { // at most once a minute: no pass pays for all objects
		for k, e := range w.written {
			if now.Sub(e.at) >= ownWriteMemory {
				delete(w.written, k)
			}
		}
		w.swept = now
	}
	w.written[uid] = ownWrite{replaced: replaced, at: now}
}
