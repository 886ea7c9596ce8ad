package console

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Subprotocol is KubeVirt's websocket subprotocol for console, VNC and port-forward streams.
const Subprotocol = "plain.kubevirt.io"

// Keepalive: a ping every PingInterval; a peer that answers nothing for PongTimeout is gone.
const (
	PingInterval = 5 * time.Second
	PongTimeout  = 60 * time.Second
	// bufferSize is the frame size (KubeVirt's 10240).
	bufferSize = 10240
	// MaxFrame bounds a frame a peer may send (a larger one closes the stream with 1009, "message
	// too big"): a client's frames are keystrokes, RFB messages or a forwarded connection's chunks of
	// at most a few tens of KiB, and a reader never holds more than one frame.
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

// Serve pipes ws and stream until either ends or ctx is done, pinging ws so idle sessions survive
// proxies. It closes ws with a reason and closes stream; when ctx ends first, the reason is ctx's
// cause (context.WithCancelCause), if it has one.
func Serve(ctx context.Context, ws *websocket.Conn, stream io.ReadWriteCloser) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_ = ws.SetReadDeadline(time.Now().Add(PongTimeout))
	ws.SetPongHandler(func(string) error { return ws.SetReadDeadline(time.Now().Add(PongTimeout)) })
	var wg sync.WaitGroup
	reason := make(chan string, 3)
	wg.Add(3)
	go func() { // stream → ws
		defer wg.Done()
		defer cancel()
		buf := make([]byte, bufferSize)
		for {
			n, err := stream.Read(buf)
			if n > 0 {
				if werr := writeFrame(ws, buf[:n]); werr != nil {
					reason <- ReasonPeerGone
					return
				}
			}
			if err != nil {
				if errors.Is(err, errTooSlow) {
					reason <- ReasonTooSlow
				} else {
					reason <- ReasonStreamEnded
				}
				return
			}
		}
	}()
	go func() { // ws → stream
		defer wg.Done()
		defer cancel()
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				reason <- ReasonPeerGone
				return
			}
			if _, err := stream.Write(data); err != nil {
				reason <- ReasonStreamEnded
				return
			}
		}
	}()
	go func() { // keepalive
		defer wg.Done()
		tick := time.NewTicker(PingInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(PingInterval)); err != nil {
					cancel()
					return
				}
			}
		}
	}()
	<-ctx.Done()
	why := ReasonPeerGone
	select {
	case why = <-reason:
	default:
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			why = cause.Error() // the caller's reason for ending the stream (a server shutting down)
		}
	}
	_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, why), time.Now().Add(time.Second))
	_ = stream.Close()
	_ = ws.Close()
	wg.Wait()
	return nil
}

// Conn adapts a websocket to a byte stream (binary frames carry raw bytes), for piping one
// websocket into another (virt-api between the client and the node agent).
type Conn struct {
	ws      *websocket.Conn
	pending []byte
}

// NewConn wraps ws, reading frames of at most MaxFrame bytes.
func NewConn(ws *websocket.Conn) *Conn {
	ws.SetReadLimit(MaxFrame)
	return &Conn{ws: ws}
}

// Read returns the bytes of the next frames; a close from the peer ends the stream.
func (c *Conn) Read(p []byte) (int, error) {
	for len(c.pending) == 0 {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return 0, io.EOF
			}
			return 0, err
		}
		c.pending = data
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// Write sends p as one binary frame, within WriteTimeout.
func (c *Conn) Write(p []byte) (int, error) {
	if err := writeFrame(c.ws, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close closes the websocket.
func (c *Conn) Close() error { return c.ws.Close() }

// writeFrame sends p as one binary frame, failing when the peer does not take it within WriteTimeout.
func writeFrame(ws *websocket.Conn, p []byte) error {
	if err := ws.SetWriteDeadline(time.Now().Add(WriteTimeout)); err != nil {
		return err
	}
	return ws.WriteMessage(websocket.BinaryMessage, p)
}
