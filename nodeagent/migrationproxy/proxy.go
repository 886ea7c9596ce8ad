// Package migrationproxy carries a live migration's streams out of the source launcher's Pod: it
// listens on the migration socket names (launcherv1.MigrationLibvirtSocket, MigrationMemorySocket,
// MigrationDisksSocket) in the source Pod's launcherv1.MigrationDir and joins each connection
// accepted there to one its Dialer makes for the same name: in the node agent, a stream over
// mutual TLS to the target node's agent, which connects it to the same name in the target Pod.
// The source launcher and its qemu see only unix sockets in their own Pod.
package migrationproxy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"sync"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	"github.com/podvirt/podvirt/internal/splice"
	"github.com/podvirt/podvirt/nodeagent/launcherclient"
)

// Names are the socket names a migration uses, in launcherv1.MigrationDir on both sides.
var Names = []string{launcherv1.MigrationLibvirtSocket, launcherv1.MigrationMemorySocket, launcherv1.MigrationDisksSocket}

// Dialer connects to the migration target's socket name.
type Dialer func(ctx context.Context, name string) (net.Conn, error)

// Proxy is a running set of listeners in one source Pod's MigrationDir.
type Proxy struct {
	// dir is the source Pod's private directory as the node sees it.
	dir    string
	lns    []net.Listener
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	log    *slog.Logger
}

// Start listens on every name in the MigrationDir of the private directory dir (created when
// missing; the sockets owned by launcherv1.LauncherUID; no symlink below dir followed) and
// proxies each connection through dial until Close.
func Start(dir string, dial Dialer, log *slog.Logger) (*Proxy, error) {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{dir: dir, ctx: ctx, cancel: cancel, log: log}
	for _, name := range Names {
		ln, err := launcherclient.ListenSocket(dir, filepath.Join(launcherv1.MigrationDir, name), launcherv1.LauncherUID, launcherv1.LauncherUID)
		if err != nil {
			p.Close()
			return nil, err
		}
		p.lns = append(p.lns, ln)
		p.wg.Add(1)
		go p.accept(ln, name, dial)
	}
	return p, nil
}

// Close stops listening, closes every proxied connection, waits for them and removes the sockets.
func (p *Proxy) Close() {
	p.cancel()
	for _, ln := range p.lns {
		_ = ln.Close()
	}
	p.wg.Wait()
	for _, name := range Names {
		_ = launcherclient.RemoveSocket(p.dir, filepath.Join(launcherv1.MigrationDir, name))
	}
}

func (p *Proxy) accept(ln net.Listener, name string, dial Dialer) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				p.log.Error("Migration proxy: accept", "socket", name, "err", err)
			}
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.join(c, name, dial)
		}()
	}
}

// join dials the target for name and joins the two connections (splice's rule: each side's end
// is passed on as a half-close) until both are done or the proxy stops.
func (p *Proxy) join(c net.Conn, name string, dial Dialer) {
	t, err := dial(p.ctx, name)
	if err != nil {
		p.log.Error("Migration proxy: cannot reach the target", "socket", name, "err", err)
		_ = c.Close()
		return
	}
	splice.Join(p.ctx, c, t, nil)
}
