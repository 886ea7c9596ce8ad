package console

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// viewerBuffer is how many bytes of output a viewer may lag behind before it is dropped. Output
// waiting for a viewer is kept as one buffer, so a burst of small chunks (a booting guest) leaves
// as a few large frames instead of queueing one frame per chunk.
const viewerBuffer = 1 << 20

// MaxViewers is how many viewers one console may have at once (each may buffer viewerBuffer bytes);
// one more is refused with ErrTooManyViewers.
const MaxViewers = 16

var errTooSlow = errors.New(ReasonTooSlow)

// ErrTooManyViewers refuses a viewer beyond MaxViewers.
var ErrTooManyViewers = fmt.Errorf("the console already has %d viewers, the limit", MaxViewers)

// Hub shares serial consoles among viewers: one connection to each console's socket, its output
// sent to every viewer, every viewer's input written to it (KubeVirt allows one viewer and evicts
// the previous one). A viewer that lags viewerBuffer bytes behind is dropped, so a slow reader
// never makes the agent buffer without bound.
type Hub struct {
	mu       sync.Mutex
	consoles map[string]*shared
}

type shared struct {
	hub     *Hub
	key     string
	conn    net.Conn
	writeMu sync.Mutex
	mu      sync.Mutex
	viewers map[*Viewer]struct{}
	done    chan struct{}
}

// Viewer is one viewer of a shared console: an io.ReadWriteCloser for Serve.
type Viewer struct {
	console *shared
	closed  chan struct{}
	once    sync.Once
	// ready holds a token while there is output to read or the viewer's output ended.
	ready chan struct{}

	mu      sync.Mutex
	pending []byte
	ended   bool // no more output: the console closed, or the viewer was dropped (tooSlow)
	tooSlow bool
}

// Join adds a viewer to the console under key, connecting to it with dial when nobody views it yet.
func (h *Hub) Join(key string, dial func() (net.Conn, error)) (*Viewer, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.consoles == nil {
		h.consoles = map[string]*shared{}
	}
	c, ok := h.consoles[key]
	if !ok {
		conn, err := dial()
		if err != nil {
			return nil, err
		}
		c = &shared{hub: h, key: key, conn: conn, viewers: map[*Viewer]struct{}{}, done: make(chan struct{})}
		h.consoles[key] = c
		go c.pump()
	}
	v := &Viewer{console: c, ready: make(chan struct{}, 1), closed: make(chan struct{})}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.viewers) >= MaxViewers {
		return nil, ErrTooManyViewers
	}
	c.viewers[v] = struct{}{}
	return v, nil
}

// Viewers is how many viewers the console under key has.
func (h *Hub) Viewers(key string) int {
	h.mu.Lock()
	c := h.consoles[key]
	h.mu.Unlock()
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.viewers)
}

// pump copies the console's output to every viewer until the console closes.
func (c *shared) pump() {
	defer close(c.done)
	buf := make([]byte, bufferSize)
	for {
		n, err := c.conn.Read(buf)
		if n > 0 {
			c.mu.Lock()
			for v := range c.viewers {
				if !v.offer(buf[:n]) {
					delete(c.viewers, v)
				}
			}
			c.mu.Unlock()
		}
		if err != nil {
			c.hub.forget(c) // first: a Join from now on dials a new connection instead of joining this one
			c.mu.Lock()
			for v := range c.viewers {
				delete(c.viewers, v)
				v.end(false)
			}
			c.mu.Unlock()
			return
		}
	}
}

func (h *Hub) forget(c *shared) {
	h.mu.Lock()
	if h.consoles[c.key] == c {
		delete(h.consoles, c.key)
	}
	h.mu.Unlock()
	_ = c.conn.Close()
}

// offer appends output for the viewer; false (and the viewer's output ends) when that would put
// it more than viewerBuffer bytes behind.
func (v *Viewer) offer(data []byte) bool {
	v.mu.Lock()
	if len(v.pending)+len(data) > viewerBuffer {
		v.mu.Unlock()
		v.end(true)
		return false
	}
	v.pending = append(v.pending, data...)
	v.mu.Unlock()
	v.signal()
	return true
}

// end marks the viewer's output as ended (tooSlow: it was dropped).
func (v *Viewer) end(tooSlow bool) {
	v.mu.Lock()
	v.ended, v.tooSlow = true, v.tooSlow || tooSlow
	v.mu.Unlock()
	v.signal()
}

func (v *Viewer) signal() {
	select {
	case v.ready <- struct{}{}:
	default:
	}
}

// Read returns the console's output; io.EOF when the console closed, errTooSlow when dropped.
func (v *Viewer) Read(p []byte) (int, error) {
	for {
		v.mu.Lock()
		n := copy(p, v.pending)
		v.pending = v.pending[n:]
		if len(v.pending) == 0 {
			v.pending = nil // let a burst's buffer go
		}
		ended, tooSlow, more := v.ended, v.tooSlow, len(v.pending) > 0
		v.mu.Unlock()
		switch {
		case more:
			v.signal()
			return n, nil
		case n > 0:
			return n, nil
		case ended && tooSlow:
			return 0, errTooSlow
		case ended:
			return 0, io.EOF
		}
		select {
		case <-v.ready:
		case <-v.closed:
			return 0, io.EOF
		}
	}
}

// Write sends the viewer's input to the console.
func (v *Viewer) Write(p []byte) (int, error) {
	v.console.writeMu.Lock()
	defer v.console.writeMu.Unlock()
	// A console that takes no input for WriteTimeout (a launcher that stopped reading) fails the
	// write instead of holding every viewer's input behind it.
	if err := v.console.conn.SetWriteDeadline(time.Now().Add(WriteTimeout)); err != nil {
		return 0, err
	}
	return v.console.conn.Write(p)
}

// Close leaves the console; the last viewer to leave disconnects from it.
func (v *Viewer) Close() error {
	v.once.Do(func() {
		close(v.closed)
		c := v.console
		c.mu.Lock()
		if _, ok := c.viewers[v]; ok {
			delete(c.viewers, v)
			v.end(false)
		}
		last := len(c.viewers) == 0
		c.mu.Unlock()
		if last {
			c.hub.forget(c) // ends pump
			<-c.done
		}
	})
	return nil
}
