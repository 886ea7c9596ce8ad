package lifetime

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
)

// The launcher counts as ended once its exit file appears, or once its socket, seen answering, has
// found no listener at goneDials dials in a row; a launcher never seen has not ended.
func TestEnded(t *testing.T) {
	dir := t.TempDir()
	tr := New(dir)
	looks := func(n int) (ended bool) { // n looks, socketEvery apart: n dials
		for range n * socketEvery {
			ended = tr.Ended() || ended
		}
		return ended
	}
	assert.False(t, looks(3), "never seen")
	ln, err := net.Listen("unix", filepath.Join(dir, launcherv1.CommandSocket))
	require.NoError(t, err)
	assert.False(t, looks(1))
	assert.True(t, tr.Seen())
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, ln.Close()) // the file stays, nobody listens: refused
	assert.False(t, looks(goneDials-1), "one refused dial is not enough")
	assert.True(t, looks(1), "refused at goneDials dials in a row")

	tr = New(dir)
	require.NoError(t, os.Remove(filepath.Join(dir, launcherv1.CommandSocket)))
	assert.False(t, looks(3), "no socket, never seen")
	require.NoError(t, os.WriteFile(filepath.Join(dir, launcherv1.ExitFile), []byte("{}"), 0o600))
	assert.True(t, tr.Ended(), "the exit file")
}
