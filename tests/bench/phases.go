//go:build bench

package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// phaseDeleted is recorded when the apiserver reports an object deleted.
const phaseDeleted = "Deleted"

// phaseRecorder remembers, for every object of a namespace it watches, the local time at which a
// watch event first showed each status.phase. The apiserver's own timestamps (creationTimestamp,
// phaseTransitionTimestamps, container startedAt) have a resolution of one second, too coarse for
// starts of a few seconds; the watch runs on the same machine as the apiserver, so its local
// clock is the apiserver's clock.
type phaseRecorder struct {
	mu     sync.Mutex
	seen   map[string]map[string]time.Time // kind/name → phase → first seen
	broken error                           // why a watch stopped early
}

func newPhaseRecorder() *phaseRecorder {
	return &phaseRecorder{seen: map[string]map[string]time.Time{}}
}

// fail records that a watch stopped: waits on the recorder report it instead of timing out.
func (r *phaseRecorder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.broken == nil {
		r.broken = err
	}
}

func (r *phaseRecorder) failure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.broken
}

// wait returns when key was first seen in phase, polling every 50 ms (the time itself comes from
// the watch). It fails at once when key reaches one of failPhases, and after timeout.
func (r *phaseRecorder) wait(ctx context.Context, key, phase string, timeout time.Duration, failPhases ...string) (time.Time, error) {
	var at time.Time
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if err := r.failure(); err != nil {
			return false, err
		}
		var ok bool
		if at, ok = r.first(key, phase); ok {
			return true, nil
		}
		for _, p := range failPhases {
			if _, bad := r.first(key, p); bad {
				return false, fmt.Errorf("%s reached phase %s", key, p)
			}
		}
		return false, nil
	})
	if err != nil {
		return at, fmt.Errorf("wait for %s to reach %s within %s: %w", key, phase, timeout, err)
	}
	return at, nil
}

func (r *phaseRecorder) record(key, phase string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.seen[key]
	if m == nil {
		m = map[string]time.Time{}
		r.seen[key] = m
	}
	if _, ok := m[phase]; !ok {
		m[phase] = at
	}
}

// first is when key was first seen in phase.
func (r *phaseRecorder) first(key, phase string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.seen[key][phase]
	return at, ok
}

// firstSeen is the earliest event of any phase for key: when the watch saw the object appear.
func (r *phaseRecorder) firstSeen(key string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var earliest time.Time
	for _, at := range r.seen[key] {
		if earliest.IsZero() || at.Before(earliest) {
			earliest = at
		}
	}
	return earliest, !earliest.IsZero()
}

// run lists res and then watches it from that list's resource version until ctx ends, recording
// every object's phase as events arrive. A watch the server closes is reopened where it ended.
func (r *phaseRecorder) run(ctx context.Context, res dynamic.ResourceInterface, kind string) error {
	list, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list %s: %w", kind, err)
	}
	rv := list.GetResourceVersion()
	for ctx.Err() == nil {
		w, err := res.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch %s: %w", kind, err)
		}
		rv, err = r.consume(w, kind, rv)
		if err != nil {
			return err
		}
	}
	return nil
}

// consume records a watch's events until it closes and returns the last resource version seen.
func (r *phaseRecorder) consume(w watch.Interface, kind, rv string) (string, error) {
	defer w.Stop()
	for ev := range w.ResultChan() {
		now := time.Now()
		if ev.Type == watch.Error {
			return rv, fmt.Errorf("watch %s: %w", kind, apierrors.FromObject(ev.Object))
		}
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			return rv, fmt.Errorf("watch %s: unexpected object %T", kind, ev.Object)
		}
		rv = u.GetResourceVersion()
		if ev.Type == watch.Bookmark {
			continue
		}
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		if ev.Type == watch.Deleted {
			phase = phaseDeleted
		}
		r.record(kind+"/"+u.GetName(), phase, now)
	}
	return rv, nil
}
