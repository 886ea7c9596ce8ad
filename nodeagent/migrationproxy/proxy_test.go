package migrationproxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podvirt/podvirt/nodeagent/launcherclient"
)

// echoDialer answers every dial with one end of a pipe whose other end echoes lines prefixed with
// the socket name; fail makes it refuse instead.
func echoDialer(fail bool) Dialer {
	return func(_ context.Context, name string) (net.Conn, error) {
		if fail {
			return nil, errors.New("target unreachable")
		}
		near, far := net.Pipe()
		go func() {
			defer far.Close()
			r := bufio.NewReader(far)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if _, err := io.WriteString(far, name+": "+line); err != nil {
					return
				}
			}
		}()
		return near, nil
	}
}

func TestProxyJoinsEachSocketToItsName(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the proxy hands its sockets to the launcher's user: run as root (make test does)")
	}
	// A directory name as long as the kubelet's emptyDir paths: longer than a socket address holds.
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	p, err := Start(dir, echoDialer(false), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	var conns []net.Conn
	for _, name := range Names {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, os.ModeSocket|0o600, fi.Mode())
		c, err := launcherclient.DialSocket(context.Background(), dir, name)
		require.NoError(t, err)
		conns = append(conns, c)
		_, err = io.WriteString(c, "hello\n")
		require.NoError(t, err)
		line, err := bufio.NewReader(c).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, name+": hello\n", line)
	}
	p.Close() // closes the proxied connections too
	for _, c := range conns {
		_, err := c.Read(make([]byte, 1))
		require.Error(t, err)
		c.Close()
	}
	for _, name := range Names {
		_, err := os.Stat(filepath.Join(dir, name))
		require.ErrorIs(t, err, os.ErrNotExist)
	}
}

func TestProxyClosesTheConnectionWhenTheTargetIsUnreachable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the proxy hands its sockets to the launcher's user: run as root (make test does)")
	}
	dir := t.TempDir()
	p, err := Start(dir, echoDialer(true), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer p.Close()
	c, err := net.Dial("unix", filepath.Join(dir, Names[0]))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)
}
