package nodeagent

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"
)

// Bounds of the TLS handshakes the agent's port (reachable from every Pod) takes on: a connection
// that does not finish its handshake within HandshakeTimeout is dropped, and one address may have
// at most MaxHandshakesPerAddress under way; more are closed at once. Past MaxHandshakes in all, only
// an address with none under way gets one (up to MaxHandshakesHard), so many senders cannot lock out
// virt-api or another node's agent either. Connections that never finish their handshake cost
// their senders; those that complete are virt-api's or an agent's, bounded by the stream limits.
const (
	HandshakeTimeout        = 5 * time.Second
	MaxHandshakesPerAddress = 16
	MaxHandshakes           = 256
	MaxHandshakesHard       = 4096
)

// handshakeListener is a TLS listener that completes each connection's handshake (within the bounds
// above) before Accept returns it.
type handshakeListener struct {
	inner net.Listener
	cfg   *tls.Config

	ready  chan net.Conn
	done   chan struct{}
	ctx    context.Context // ends handshakes under way at Close
	cancel context.CancelFunc
	once   sync.Once
	wg     sync.WaitGroup

	mu      sync.Mutex
	pending map[string]int
	total   int
}

// listenTLS starts accepting on ln; Close stops it, Wait waits for its goroutines.
func listenTLS(ln net.Listener, cfg *tls.Config) *handshakeListener {
	l := &handshakeListener{inner: ln, cfg: cfg, ready: make(chan net.Conn), done: make(chan struct{}), pending: map[string]int{}}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

// acceptLoop accepts until Close; an error of the moment (out of file descriptors, a connection
// reset before Accept) is retried after a growing pause, as http.Server does.
func (l *handshakeListener) acceptLoop() {
	defer l.wg.Done()
	pause := 5 * time.Millisecond
	for {
		raw, err := l.inner.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				_ = l.Close()
				return
			}
			select {
			case <-l.done:
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, time.Second)
			continue
		}
		pause = 5 * time.Millisecond
		host, _, _ := net.SplitHostPort(raw.RemoteAddr().String())
		if !l.admit(host) {
			_ = raw.Close()
			continue
		}
		l.wg.Add(1)
		go l.handshake(raw, host)
	}
}

// admit reserves a handshake slot for host, or reports false when host or the listener is at its bound.
func (l *handshakeListener) admit(host string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.pending[host]
	if n >= MaxHandshakesPerAddress || l.total >= MaxHandshakesHard || (l.total >= MaxHandshakes && n > 0) {
		return false
	}
	l.pending[host]++
	l.total++
	return true
}

func (l *handshakeListener) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending[host]--; l.pending[host] <= 0 {
		delete(l.pending, host)
	}
	l.total--
}

func (l *handshakeListener) handshake(raw net.Conn, host string) {
	defer l.wg.Done()
	conn := tls.Server(raw, l.cfg)
	ctx, cancel := context.WithTimeout(l.ctx, HandshakeTimeout)
	err := conn.HandshakeContext(ctx)
	cancel()
	l.release(host)
	if err != nil {
		_ = conn.Close()
		return
	}
	select {
	case l.ready <- conn:
	case <-l.done:
		_ = conn.Close()
	}
}

// Accept returns the next connection whose handshake completed.
func (l *handshakeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting and ends the handshakes under way.
func (l *handshakeListener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		l.cancel()
		err = l.inner.Close()
	})
	return err
}

// Wait returns once the listener's goroutines have ended (after Close).
func (l *handshakeListener) Wait() { l.wg.Wait() }

// Addr is the listening address.
func (l *handshakeListener) Addr() net.Addr { return l.inner.Addr() }
