package console

import (
	"context"
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

// A peer's frame larger than MaxFrame closes the stream (1009, message too big) once MaxFrame of
// it has passed: frames are passed on as they arrive, never held whole, so one client cannot grow
// virt-api or an agent by sending one huge frame.
func TestServeRefusesAnOversizedFrame(t *testing.T) {
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
	_ = ws.WriteMessage(websocket.BinaryMessage, make([]byte, 64<<20)) // the server may close while it is sent
	for {
		if _, _, err = ws.ReadMessage(); err != nil {
			break
		}
	}
	<-served
	assert.LessOrEqual(t, got.Load(), int64(len("small")+MaxFrame), "no more than the limit of the oversized frame reached the stream")
	assert.Greater(t, got.Load(), int64(len("small")), "the oversized frame is passed on as it arrives")
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
