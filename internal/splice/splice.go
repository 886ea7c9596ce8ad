// Package splice joins two byte-stream connections: each one's input is copied to the other
// until both directions end (the launcher's port-forward, the node agents' migration streams),
// including the HTTP Upgrade that turns a request into such a stream.
package splice

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
)

// Conns copies a (whose already buffered bytes, if any, are in aPending) and b into each other
// until both directions end, half-closing each side when its input ends, then closes both.
func Conns(a net.Conn, aPending io.Reader, b net.Conn) {
	if aPending == nil {
		aPending = a
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(b, aPending)
		closeWrite(b)
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(a, b)
		closeWrite(a)
	}()
	wg.Wait()
	_ = a.Close()
	_ = b.Close()
}

// closeWrite half-closes conn when it can (the peer sees EOF and may still answer), else closes it.
func closeWrite(conn net.Conn) {
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = conn.Close()
}

// Upgrade takes over the HTTP connection of w, answers 101 Switching Protocols to protocol and
// joins the connection to target until both directions end. When the connection cannot be taken
// over it returns the error, nothing written and target closed, so the caller can still answer.
func Upgrade(w http.ResponseWriter, protocol string, target net.Conn) error {
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
	Conns(conn, buf.Reader, target)
	return nil
}
