package console

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podvirt/podvirt/internal/splice"
)

// countingStream records how many bytes reach the guest's side of a stream.
type countingStream struct {
	net.Conn
	got *atomic.Int64
}

func (c countingStream) Write(p []byte) (int, error) { c.got.Add(int64(len(p))); return len(p), nil }

// A peer's frame larger than MaxFrame closes the stream with 1009 (message too big), and the
// client hears it: one frame announcing more is refused at its header, with nothing passed on; a
// message sent in fragments is passed on as it arrives, up to the limit, never held whole. Either
// way one client cannot grow virt-api or an agent by sending one huge frame.
func TestServeRefusesAnOversizedFrame(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(ws *websocket.Conn) error
		most int64 // bytes of the oversized frame that may reach the stream
	}{
		{"one frame", func(ws *websocket.Conn) error {
			header := []byte{0x82, 0x80 | 127, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} // FIN binary, masked (key 0), 64-bit length
			binary.BigEndian.PutUint64(header[2:10], 64<<20)
			if _, err := ws.NetConn().Write(header); err != nil {
				return err
			}
			_, err := ws.NetConn().Write(make([]byte, 64<<20))
			return err
		}, 0},
		{"fragments", func(ws *websocket.Conn) error { return ws.WriteMessage(websocket.BinaryMessage, make([]byte, 64<<20)) }, MaxFrame},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got atomic.Int64
			served := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer close(served)
				ws, err := Upgrade(w, r)
				if err != nil {
					return
				}
				near, far := net.Pipe()
				defer far.Close()
				go func() { _, _ = io.Copy(io.Discard, far) }()
				_ = Serve(context.Background(), ws, countingStream{Conn: near, got: &got})
			}))
			defer srv.Close()
			ws, _, err := Dialer().Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
			require.NoError(t, err)
			defer ws.Close()
			require.NoError(t, ws.WriteMessage(websocket.BinaryMessage, []byte("small")))
			sent := make(chan struct{})
			go func() {
				defer close(sent)
				_ = tc.send(ws) // the server may close while it is sent
			}()
			for {
				if _, _, err = ws.ReadMessage(); err != nil {
					break
				}
			}
			assert.True(t, websocket.IsCloseError(err, websocket.CloseMessageTooBig), "the client is told: %v", err)
			<-served
			_ = ws.Close()
			<-sent
			assert.LessOrEqual(t, got.Load(), int64(len("small"))+tc.most, "no more than the limit of the oversized frame reached the stream")
			assert.GreaterOrEqual(t, got.Load(), int64(len("small")), "the frame within the limit reached the stream")
		})
	}
}

// What a client is told when its stream ends, by what ended it.
func TestCloseReason(t *testing.T) {
	shutdown := errors.New("virt-api is shutting down")
	cases := []struct {
		ending splice.Ending
		want   string
	}{
		{splice.Ending{Side: splice.Service}, ReasonStreamEnded},
		{splice.Ending{Side: splice.Service, Err: errTooSlow}, ReasonTooSlow},
		{splice.Ending{Side: splice.Service, Err: io.ErrClosedPipe}, ReasonStreamEnded},
		{splice.Ending{Side: splice.Client}, ReasonPeerGone},
		{splice.Ending{Side: splice.Client, Err: io.ErrUnexpectedEOF}, ReasonPeerGone},
		{splice.Ending{Canceled: true, Err: context.Canceled}, ReasonPeerGone},
		{splice.Ending{Canceled: true, Err: errPeerSilent}, ReasonPeerGone},
		{splice.Ending{Canceled: true, Err: shutdown}, shutdown.Error()},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, closeReason(c.ending), "%+v", c.ending)
	}
}
