package console

import "sync"

// Limiter caps how many streams are open at once per key (an instance on a node agent, a user on
// virt-api): a fan-out with a bound. The zero value is ready to use.
type Limiter struct {
	mu   sync.Mutex
	open map[string]int
}

// Acquire takes a slot for key, or reports false when key already holds max. The returned release
// gives the slot back (once, however often it is called).
func (l *Limiter) Acquire(key string, max int) (release func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key] >= max {
		return nil, false
	}
	if l.open == nil {
		l.open = map[string]int{}
	}
	l.open[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.open[key]--; l.open[key] <= 0 {
				delete(l.open, key)
			}
		})
	}, true
}
