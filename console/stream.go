package console

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/podvirt/podvirt/internal/splice"
)

// Subprotocol is KubeVirt's websocket subprotocol for console, VNC and port-forward streams.
const Subprotocol = "plain.kubevirt.io"

// Keepalive: a ping every PingInterval; a peer that answers nothing for PongTimeout is gone.
const (
	PingInterval = 5 * time.Second
	PongTimeout  = 60 * time.Second
	// bufferSize is a websocket's read and write buffer (KubeVirt's 10240).
	bufferSize = 10240
	// MaxFrame bounds a frame a peer may send (a larger one closes the stream with 1009, "message
	// too big"): a client's frames are keystrokes, RFB messages or a forwarded connection's chunks of
	// at most a few tens of KiB, and a reader passes frames on as they arrive, never holding one whole.
	MaxFrame = 1 << 20
	// WriteTimeout bounds one frame's write: a peer that reads nothing for that long is gone.
	WriteTimeout = 10 * time.Second
)

// Close reasons a client can print.
const (
	ReasonStreamEnded = "the stream ended (the VMI stopped, or the guest closed it)"
	ReasonPeerGone    = "the other end of the stream went away"
	ReasonTooSlow     = "this viewer did not keep up with the console's output"
)

// Upgrader accepts KubeVirt's subprotocol. The caller was authenticated and authorized before (by
// the kube-apiserver and virt-api, or by mutual TLS), so the origin is not checked: browsers (noVNC)
// connect through kubectl proxy.
var upgrader = websocket.Upgrader{
	ReadBufferSize: bufferSize, WriteBufferSize: bufferSize, Subprotocols: []string{Subprotocol},
	CheckOrigin: func(*http.Request) bool { return true },
}

// Upgrade turns the request into a websocket that reads frames of at most MaxFrame bytes.
func Upgrade(w http.ResponseWriter, r *http.Request) (*websocket.Conn, error) {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(MaxFrame)
	return ws, nil
}

// Dialer dials websockets with KubeVirt's subprotocol.
func Dialer() *websocket.Dialer {
	return &websocket.Dialer{ReadBufferSize: bufferSize, WriteBufferSize: bufferSize, Subprotocols: []string{Subprotocol}, HandshakeTimeout: 30 * time.Second}
}

// Serve joins ws (the client) and stream (the service) with splice.Join until either ends or ctx
// is done, pinging ws so idle sessions survive proxies. It closes ws with a reason and closes
// stream; when ctx ends first, the reason is ctx's cause (context.WithCancelCause), if it has one.
func Serve(ctx context.Context, ws *websocket.Conn, stream io.ReadWriteCloser) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	_ = ws.SetReadDeadline(time.Now().Add(PongTimeout))
	ws.SetPongHandler(func(string) error { return ws.SetReadDeadline(time.Now().Add(PongTimeout)) })
	var wg sync.WaitGroup
	defer wg.Wait()
	pinging, stopPinging := context.WithCancel(ctx)
	defer stopPinging()
	wg.Add(1)
	go func() {
		defer wg.Done()
		keepAlive(pinging, ws, cancel)
	}()
	splice.Join(ctx, NewConn(ws), stream, func(e splice.Ending) {
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, closeReason(e)), time.Now().Add(time.Second))
	})
	return nil
}

// errPeerSilent ends a stream whose peer stopped answering pings.
var errPeerSilent = errors.New(ReasonPeerGone)

// keepAlive pings ws every PingInterval until ctx ends; a ping that cannot be sent ends the stream.
func keepAlive(ctx context.Context, ws *websocket.Conn, end context.CancelCauseFunc) {
	tick := time.NewTicker(PingInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(PingInterval)); err != nil {
				end(errPeerSilent)
				return
			}
		}
	}
}

// closeReason is what a client is told when its stream ends.
func closeReason(e splice.Ending) string {
	switch {
	case e.Canceled && e.Err != nil && !errors.Is(e.Err, context.Canceled):
		return e.Err.Error() // the caller's reason for ending the stream (a server shutting down)
	case e.Canceled, e.Side == splice.Client:
		return ReasonPeerGone
	case errors.Is(e.Err, errTooSlow):
		return ReasonTooSlow
	}
	return ReasonStreamEnded
}

// Conn adapts a websocket to a byte stream (binary frames carry raw bytes), for piping one
// websocket into another (virt-api between the client and the node agent).
type Conn struct {
	ws     *websocket.Conn
	cur    io.Reader   // the frame being read; nil between frames
	tooBig atomic.Bool // the peer sent a frame over MaxFrame: Close lingers (Close may run beside Read)
}

// A Conn closed for a frame over MaxFrame discards what the peer still sends, for at most
// lingerTime and lingerBytes, before it closes the connection: closing it at once, with the rest
// of the frame unread, resets it, and the peer may lose the close frame that says why (1009).
const (
	lingerTime  = 2 * time.Second
	lingerBytes = 128 << 20
)

// NewConn wraps ws, reading frames of at most MaxFrame bytes.
func NewConn(ws *websocket.Conn) *Conn {
	ws.SetReadLimit(MaxFrame)
	return &Conn{ws: ws}
}

// Read returns the bytes of the next frames as they arrive, never holding a whole frame: a stream
// costs its joiner's buffer however large the peer's frames are. A close from the peer ends the stream.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if c.cur == nil {
			_, r, err := c.ws.NextReader()
			if err != nil {
				return 0, c.ended(err)
			}
			c.cur = r
		}
		n, err := c.cur.Read(p)
		if errors.Is(err, io.EOF) { // this frame ended; the next one may follow
			c.cur, err = nil, nil
		}
		if n > 0 || err != nil {
			return n, c.ended(err)
		}
	}
}

// ended notes a frame over the limit (gorilla refuses it at its header, or once a fragmented
// message passes the limit, and has sent the close frame, 1009) and turns the peer's close frame
// into io.EOF, the end of the stream.
func (c *Conn) ended(err error) error {
	var ce *websocket.CloseError
	switch {
	case errors.Is(err, websocket.ErrReadLimit):
		c.tooBig.Store(true)
	case errors.As(err, &ce):
		return io.EOF
	}
	return err
}

// Write sends p as one binary frame, within WriteTimeout.
func (c *Conn) Write(p []byte) (int, error) {
	if err := writeFrame(c.ws, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close closes the websocket, after a bounded linger when the peer's frame was too big.
func (c *Conn) Close() error {
	if c.tooBig.Load() {
		raw := c.ws.NetConn()
		if raw.SetReadDeadline(time.Now().Add(lingerTime)) == nil {
			_, _ = io.CopyN(io.Discard, raw, lingerBytes)
		}
	}
	return c.ws.Close()
}

// writeFrame sends p as one binary frame, failing when the peer does not take it within WriteTimeout.
func writeFrame(ws *websocket.Conn, p []byte) error {
	if err := ws.SetWriteDeadline(time.Now().Add(WriteTimeout)); err != nil {
		return err
	}
	return ws.WriteMessage(websocket.BinaryMessage, p)
}
