package launcherclient_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	"github.com/podvirt/podvirt/nodeagent/launcherclient"
)

// hostileLauncher serves the command socket in a fresh private directory with answer, which gets
// each connection once the request has been read; it returns the directory. Everything is closed
// and joined when the test ends.
func hostileLauncher(t *testing.T, answer func(net.Conn)) string {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, launcherv1.CommandSocket))
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = http.ReadRequest(bufio.NewReader(c))
				answer(c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return dir
}

// forever writes chunk until the connection fails (the client gave up).
func forever(chunk string) func(net.Conn) {
	return func(c net.Conn) {
		for {
			if _, err := c.Write([]byte(chunk)); err != nil {
				return
			}
		}
	}
}

// A launcher is the tenant's: whatever it does on its command socket, each call of the agent
// returns by its deadline (100 ms here) or sooner, reads a bounded amount, and passes on only a
// bounded status.
func TestCallsReturnWhateverTheLauncherAnswers(t *testing.T) {
	const deadline = 100 * time.Millisecond
	slack := 400 * time.Millisecond // a loaded CI machine's scheduling, not the bound under test
	stall := func(c net.Conn) { _, _ = c.Read(make([]byte, 1)) }
	for _, tc := range []struct {
		name   string
		answer func(net.Conn)
		call   func(ctx context.Context, c *launcherclient.Client) error
		want   string
	}{
		{"status: never answers", stall, status, "context deadline exceeded"},
		{"status: drips a header a millisecond", func(c net.Conn) {
			_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\n"))
			for {
				if _, err := c.Write([]byte("X-Drip: 1\r\n")); err != nil {
					return
				}
				time.Sleep(time.Millisecond)
			}
		}, status, "context deadline exceeded"},
		{"status: endless headers", func(c net.Conn) {
			_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\n"))
			forever("X-Flood: " + strings.Repeat("a", 1000) + "\r\n")(c)
		}, status, "header"},
		{"status: endless body", func(c net.Conn) {
			_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n"))
			forever(strings.Repeat(" ", 4096))(c)
		}, status, "longer than 1048576 bytes"},
		{"status: not HTTP", forever("\x00\xff"), status, "launcher /v1/status"},
		{"port-forward: never answers the upgrade", stall, portForward, "i/o timeout"},
		{"port-forward: endless upgrade headers", func(c net.Conn) {
			_, _ = c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\n"))
			forever("X-Flood: " + strings.Repeat("a", 1000) + "\r\n")(c)
		}, portForward, "reply headers longer than 65536 bytes"},
		{"port-forward: endless refusal", func(c net.Conn) {
			_, _ = c.Write([]byte("HTTP/1.1 500 No\r\n\r\n"))
			forever(strings.Repeat("x", 4096))(c)
		}, portForward, "500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := launcherclient.New(hostileLauncher(t, tc.answer))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			err := tc.call(ctx, c)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			assert.ErrorContains(t, err, tc.want)
			assert.Less(t, took, deadline+slack, "the call returns by its deadline")
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "the call reads a bounded amount")
		})
	}
}

func status(ctx context.Context, c *launcherclient.Client) error {
	_, err := c.Status(ctx)
	return err
}

func portForward(ctx context.Context, c *launcherclient.Client) error {
	conn, err := c.PortForward(ctx, 80)
	if err == nil {
		_ = conn.Close()
	}
	return err
}

// A launcher's report reaches the instance's status only bounded: a forged status of any size or
// content is cut to what the API accepts.
func TestStatusIsBoundedWhateverTheLauncherReports(t *testing.T) {
	nics := make([]map[string]any, 1000)
	for i := range nics {
		nics[i] = map[string]any{"name": strings.Repeat("n", 300), "ipAddresses": []string{"1.2.3.4", "x"}}
	}
	body, err := json.Marshal(map[string]any{
		"state": "Running", "reason": strings.Repeat("R", 10000) + "\x1b[2J", "message": strings.Repeat("m", 100000) + "\x00\x1b]0;pwned\x07",
		"interfaces": nics,
	})
	require.NoError(t, err)
	c := launcherclient.New(hostileLauncher(t, func(conn net.Conn) {
		_, _ = conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"))
		_, _ = conn.Write(body)
		_ = conn.Close()
	}))
	st, err := c.Status(context.Background())
	require.NoError(t, err)
	assert.LessOrEqual(t, len(st.Reason), 64)
	assert.LessOrEqual(t, len(st.Message), 1024)
	assert.NotContains(t, st.Message, "\x1b")
	assert.NotContains(t, st.Message, "\x00")
	assert.LessOrEqual(t, len(st.Interfaces), 32)
}

// What a launcher plants at its socket paths sends the agent nowhere else: a symlink (to a socket
// of the node), a FIFO, a directory or a regular file is refused at once.
func TestSocketsALauncherPlantsAreRefused(t *testing.T) {
	elsewhere := filepath.Join(t.TempDir(), "node.sock")
	ln, err := net.Listen("unix", elsewhere)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	for _, tc := range []struct {
		name  string
		plant func(string) error
		want  string
	}{
		{"symlink to a socket of the node", func(p string) error { return os.Symlink(elsewhere, p) }, "symbolic links"},
		{"FIFO", func(p string) error { return syscall.Mkfifo(p, 0o600) }, "connection refused"},
		{"directory", func(p string) error { return os.Mkdir(p, 0o700) }, "connection refused"},
		{"regular file", func(p string) error { return os.WriteFile(p, []byte("x"), 0o600) }, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, name := range []string{launcherv1.CommandSocket, launcherv1.SerialSocket, launcherv1.VNCSocket} {
				require.NoError(t, tc.plant(filepath.Join(dir, name)))
			}
			c := launcherclient.New(dir)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := c.Status(ctx)
			assert.ErrorContains(t, err, tc.want, "command socket")
			_, err = c.SerialConsole(ctx)
			assert.ErrorContains(t, err, tc.want, "serial socket")
			_, err = c.VNC(ctx)
			assert.ErrorContains(t, err, tc.want, "VNC socket")
			assert.NoError(t, ctx.Err(), "refused at once, not by the deadline")
		})
	}
}
