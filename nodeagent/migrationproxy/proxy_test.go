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
	"golang.org/x/sys/unix"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
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
	require.NoError(t, os.Mkdir(dir, 0o777))
	p, err := Start(dir, echoDialer(false), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	var conns []net.Conn
	for _, name := range Names {
		var st unix.Stat_t
		require.NoError(t, unix.Lstat(filepath.Join(dir, launcherv1.MigrationDir, name), &st))
		require.Equal(t, uint32(unix.S_IFSOCK), st.Mode&unix.S_IFMT)
		require.Equal(t, uint32(launcherv1.LauncherUID), st.Uid)
		c, err := launcherclient.DialSocket(context.Background(), dir, filepath.Join(launcherv1.MigrationDir, name))
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
		_, err := os.Stat(filepath.Join(dir, launcherv1.MigrationDir, name))
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
	c, err := net.Dial("unix", filepath.Join(dir, launcherv1.MigrationDir, Names[0]))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)
}

// The launcher owns its private directory: a symlink it puts there never leads the agent (root)
// elsewhere, neither to create or hand over sockets nor to connect.
func TestProxyFollowsNoSymlink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the proxy hands its sockets to the launcher's user: run as root (make test does)")
	}
	dir, elsewhere := t.TempDir(), t.TempDir()
	require.NoError(t, os.Symlink(elsewhere, filepath.Join(dir, launcherv1.MigrationDir)))
	_, err := Start(dir, echoDialer(false), slog.New(slog.DiscardHandler))
	require.ErrorIs(t, err, unix.ELOOP)
	entries, err := os.ReadDir(elsewhere)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing created through the symlink")

	// A socket name that is a symlink to a socket outside is not connected to.
	ln, err := net.Listen("unix", filepath.Join(elsewhere, "node.sock"))
	require.NoError(t, err)
	defer ln.Close()
	require.NoError(t, os.Symlink(filepath.Join(elsewhere, "node.sock"), filepath.Join(dir, "launcher.sock")))
	_, err = launcherclient.DialSocket(context.Background(), dir, "launcher.sock")
	require.ErrorIs(t, err, unix.ELOOP)
}
