package launcherclient_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	"github.com/podvirt/podvirt/nodeagent/launcherclient"
)

// A launcher owns its private directory and may plant anything at the exit file's path; the agent,
// root on the node, must neither follow it, nor hang on it, nor read it without a bound. Each plant
// is refused with a message, and a neighbour's honest file is still read.
func TestExitStatusRefusesWhatALauncherPlants(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.json")
	require.NoError(t, os.WriteFile(outside, []byte(`{"state":"Crashed","reason":"Forged"}`), 0o600))
	for _, tc := range []struct {
		name  string
		plant func(path string) error
		want  string
	}{
		{"symlink to /dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }, "symbolic links"},
		{"symlink to a file of the node", func(p string) error { return os.Symlink(outside, p) }, "symbolic links"},
		{"relative symlink out of the directory", func(p string) error { return os.Symlink("../../../../../../etc/hostname", p) }, "symbolic links"},
		{"FIFO nobody writes", func(p string) error { return syscall.Mkfifo(p, 0o600) }, "not a regular file"},
		{"directory", func(p string) error { return os.Mkdir(p, 0o700) }, "not a regular file"},
		{"unix socket", func(p string) error {
			fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
			if err != nil {
				return err
			}
			defer syscall.Close(fd)
			return syscall.Bind(fd, &syscall.SockaddrUnix{Name: p})
		}, "no such device or address"}, // open(2) of a socket: ENXIO
		{"hard link to a file of the node", func(p string) error { return os.Link(outside, p) }, "has 2 links"},
		{"oversized file", func(p string) error { return os.WriteFile(p, []byte(strings.Repeat(" ", 1<<20)), 0o600) }, "more than 65536 bytes"},
		{"forged state that is not JSON", func(p string) error { return os.WriteFile(p, []byte("\x00\xff"), 0o600) }, "decode launcher exit status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir() // short: a socket path must fit
			require.NoError(t, tc.plant(filepath.Join(dir, launcherv1.ExitFile)))
			done := make(chan error, 1)
			go func() { _, err := launcherclient.New(dir).ExitStatus(); done <- err }()
			select {
			case err := <-done:
				assert.ErrorContains(t, err, tc.want)
			case <-time.After(10 * time.Second):
				t.Fatal("ExitStatus hung on what the launcher planted")
			}
		})
	}

	honest := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(honest, launcherv1.ExitFile), []byte(`{"state":"Shutoff","reason":"GuestShutdown"}`), 0o600))
	st, err := launcherclient.New(honest).ExitStatus()
	require.NoError(t, err)
	assert.Equal(t, launcherv1.DomainState("Shutoff"), st.State)
}
