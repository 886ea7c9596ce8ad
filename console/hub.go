package console

import (
	"errors"
	"io"
	"net"
	"sync"
)

// viewerBuffer is how many output chunks a viewer may lag behind before it is dropped.
const viewerBuffer = 256

var errTooSlow = errors.New(ReasonTooSlow)

// Hub shares serial consoles among viewers: one connection to each console's socket, its output
// sent to every viewer, every viewer's input written to it (KubeVirt allows one viewer and evicts
// the previous one). A viewer that lags viewerBuffer chunks behind is dropped, so a slow reader
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
	out     chan []byte
	closed  chan struct{}
	once    sync.Once
	tooSlow bool
	pending []byte
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
	v := &Viewer{console: c, out: make(chan []byte, viewerBuffer), closed: make(chan struct{})}
	c.mu.Lock()
	c.viewers[v] = struct{}{}
	c.mu.Unlock()
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
			chunk := append([]byte(nil), buf[:n]...)
			c.mu.Lock()
			for v := range c.viewers {
				select {
				case v.out <- chunk:
				default:
					v.tooSlow = true
					delete(c.viewers, v)
					close(v.out)
				}
			}
			c.mu.Unlock()
		}
		if err != nil {
			c.mu.Lock()
			for v := range c.viewers {
				delete(c.viewers, v)
				close(v.out)
			}
			c.mu.Unlock()
			c.hub.forget(c)
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

// Read returns the console's output; io.EOF when the console closed, errTooSlow when dropped.
func (v *Viewer) Read(p []byte) (int, error) {
	if len(v.pending) == 0 {
		select {
		case chunk, ok := <-v.out:
			if !ok {
				if v.tooSlow {
					return 0, errTooSlow
				}
				return 0, io.EOF
			}
			v.pending = chunk
		case <-v.closed:
			return 0, io.EOF
		}
	}
	n := copy(p, v.pending)
	v.pending = v.pending[n:]
	return n, nil
}

// Write sends the viewer's input to the console.
func (v *Viewer) Write(p []byte) (int, error) {
	v.console.writeMu.Lock()
	defer v.console.writeMu.Unlock()
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
			close(v.out)
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
