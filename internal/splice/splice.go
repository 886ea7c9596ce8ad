// Package splice joins two byte-stream connections: each one's input is copied to the other
// until both directions end (the launcher's port-forward, the node agents' migration streams).
package splice

import (
	"io"
	"net"
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
