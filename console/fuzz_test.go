package console

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// sinkStream is a guest's stream that takes everything and says nothing until closed.
type sinkStream struct {
	got    *atomic.Int64
	closed chan struct{}
	once   sync.Once
}

func (s *sinkStream) Read([]byte) (int, error) { <-s.closed; return 0, io.EOF }
func (s *sinkStream) Write(p []byte) (int, error) {
	s.got.Add(int64(len(p)))
	return len(p), nil
}
func (s *sinkStream) Close() error { s.once.Do(func() { close(s.closed) }); return nil }

// handshake opens a websocket of KubeVirt's subprotocol by hand, so that what follows is raw frames.
const handshake = "GET /console HTTP/1.1\r\nHost: podvirt\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
	"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: " + Subprotocol + "\r\n\r\n"

// FuzzServe sends any bytes as a client's websocket frames to a console stream: the server neither
// panics nor hangs (it has closed or reset the connection within a few seconds of the client's
// end), and it
// passes on to the guest no more bytes than the client sent.
func FuzzServe(f *testing.F) {
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := Upgrade(w, r)
		if err != nil {
			return
		}
		_ = Serve(context.WithoutCancel(r.Context()), ws, &sinkStream{got: &got, closed: make(chan struct{})})
	}))
	f.Cleanup(srv.Close)
	masked := func(op byte, payload string) []byte { // a client's frame: FIN, opcode, mask bit, zero key
		b := []byte{0x80 | op, 0x80 | byte(len(payload)), 0, 0, 0, 0}
		return append(b, payload...)
	}
	f.Add(masked(0x2, "hello"))
	f.Add(masked(0x1, "text"))
	f.Add(append(masked(0x2, "a"), masked(0x8, "\x03\xe8bye")...))
	f.Add([]byte{0x82, 0xff, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0})     // a 1 MiB+ length, no payload
	f.Add([]byte{0x02, 0x81, 0, 0, 0, 0, 'x', 0x80, 0x81, 0, 0, 0, 0, 'y'}) // fragmented
	f.Add([]byte{0x89, 0x80, 0, 0, 0, 0})                                   // a ping
	f.Add([]byte("not a frame at all"))
	f.Fuzz(func(t *testing.T, frames []byte) {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		before := got.Load()
		if _, err := conn.Write(append([]byte(handshake), frames...)); err != nil {
			t.Fatal(err)
		}
		_ = conn.(*net.TCPConn).CloseWrite()
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		// The server ends the stream by closing the connection: an end of file, or a reset when
		// frames it did not read were still on their way (after a close frame, say).
		var nerr net.Error
		if _, err := io.Copy(io.Discard, conn); errors.As(err, &nerr) && nerr.Timeout() {
			t.Fatalf("the server did not end the stream within 5 s of the client's end: %v", err)
		}
		// The server may still be finishing the handler: what reached the guest is bounded anyway.
		if passed := got.Load() - before; passed > int64(len(frames)) {
			t.Fatalf("%d bytes reached the guest from %d bytes of frames", passed, len(frames))
		}
	})
}
