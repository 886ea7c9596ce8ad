// Package splice is Podvirt's one stream joiner: it copies two byte streams into each other
// (a client's and a service's: virtctl's local connection and its websocket, a websocket and a
// guest's console or VNC socket, the launcher's port-forward, the node agents' migration streams)
// under one half-close rule, and turns an HTTP Upgrade request into such a stream.
//
// The rule. Each direction copies until its input ends.
//  1. An input that cannot half-close ended for good (a websocket: its close ends both directions),
//     so its end ends the join.
//  2. An input that can (a TCP or Unix socket's FIN) passes its end on as a half-close when the
//     output can take one, and the other direction goes on: the peer may still answer.
//  3. When the output cannot take a half-close (a websocket), the client's end is dropped — its
//     request is complete and the answer still comes back — and the service's end ends the join,
//     since nothing would come after it.
//
// Any read or write error ends the join, as does its context. The join ends when both directions
// have ended or one of these ends it; then both streams are closed and both copies joined.
package splice

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
)

// Side names one of the two streams of a join.
type Side int

const (
	// Client is the side that asked for the stream (its half-close is a request's end).
	Client Side = iota
	// Service is the side that serves it (a guest's socket, a console, a launcher).
	Service
)

func (s Side) String() string { return [...]string{"client", "service"}[s] }

func (s Side) other() Side { return 1 - s }

// Ending says what ended a join: the side whose input ended or whose read or write failed (Err
// then says how), or, with Canceled, the context (Err is its cause).
type Ending struct {
	Side     Side
	Err      error
	Canceled bool
}

// halfCloser is a stream that can end its output and still read (TCP, Unix sockets, TLS).
type halfCloser interface {
	CloseWrite() error
}

// bufferSize is the largest chunk one read passes on (a websocket frame at most).
const bufferSize = 32 << 10

// direction is the outcome of one direction's copy: final when it ends the whole join.
type direction struct {
	ending Ending
	final  bool
}

// Join copies client and service into each other under the package's half-close rule until the
// join ends, then calls finish (when not nil: a last word, such as a websocket's close reason,
// while both streams are still open), closes both and waits for both copies.
func Join(ctx context.Context, client, service io.ReadWriteCloser, finish func(Ending)) Ending {
	done := make(chan direction, 2)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); done <- copyOneWay(service, client, Client) }()
	go func() { defer wg.Done(); done <- copyOneWay(client, service, Service) }()
	var end Ending
	for running := 2; running > 0; {
		select {
		case <-ctx.Done():
			end, running = Ending{Canceled: true, Err: context.Cause(ctx)}, 0
		case d := <-done:
			end, running = d.ending, running-1
			if d.final {
				running = 0
			}
		}
	}
	if finish != nil {
		finish(end)
	}
	_ = client.Close()
	_ = service.Close()
	wg.Wait()
	return end
}

// copyOneWay copies src (the stream of side from) into dst and applies the half-close rule when
// src ends.
func copyOneWay(dst io.Writer, src io.Reader, from Side) direction {
	buf := make([]byte, bufferSize)
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return direction{ending: Ending{Side: from.other(), Err: werr}, final: true}
			}
		}
		switch {
		case rerr == nil:
			continue
		case !errors.Is(rerr, io.EOF):
			return direction{ending: Ending{Side: from, Err: rerr}, final: true}
		}
		if _, ok := src.(halfCloser); !ok {
			return direction{ending: Ending{Side: from}, final: true} // rule 1
		}
		if hc, ok := dst.(halfCloser); ok {
			_ = hc.CloseWrite() // rule 2
			return direction{ending: Ending{Side: from}}
		}
		return direction{ending: Ending{Side: from}, final: from == Service} // rule 3
	}
}

// buffered is a connection whose first bytes were already read into r (an HTTP server's buffer);
// it half-closes like the connection, or closes when the connection cannot.
type buffered struct {
	net.Conn
	r io.Reader
}

func (b buffered) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b buffered) CloseWrite() error {
	if hc, ok := b.Conn.(halfCloser); ok {
		return hc.CloseWrite()
	}
	return b.Conn.Close()
}

// ClientEnd is what the end of an upgraded connection's input means.
type ClientEnd int

const (
	// ClientHalfCloses: the client's end is a half-close, passed on (a migration stream).
	ClientHalfCloses ClientEnd = iota
	// ClientEndsJoin: the client never half-closes (a websocket is behind it: the node agent's
	// port-forward), so its end is final and ends the join — a service that ignores a half-close
	// cannot hold the connection open.
	ClientEndsJoin
)

// whole hides a connection's half-close: its end ends the join (rule 1).
type whole struct{ io.ReadWriteCloser }

// Upgrade takes over the HTTP connection of w, answers 101 Switching Protocols to protocol and
// joins the connection (the client, whose end means what end says) to target (the service) until
// the join ends or ctx does. When the connection cannot be taken over it returns the error,
// nothing written and target closed, so the caller can still answer.
//
// ctx must not be the request's own: net/http cancels a hijacked request's context when the
// client half-closes, which would end the join on the half-close the rule passes on.
func Upgrade(ctx context.Context, w http.ResponseWriter, protocol string, target net.Conn, end ClientEnd) error {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = target.Close()
		return fmt.Errorf("hijack: %w", err)
	}
	_, err = buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + protocol + "\r\n\r\n")
	if err == nil {
		err = buf.Flush()
	}
	if err != nil {
		_ = target.Close()
		_ = conn.Close()
		return nil // the client is gone: nothing to answer
	}
	var client io.ReadWriteCloser = buffered{Conn: conn, r: buf.Reader}
	if end == ClientEndsJoin {
		client = whole{client}
	}
	Join(ctx, client, target, nil)
	return nil
}
