package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteReplacesWholeOrNotAtAll(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cert.pem")
	require.NoError(t, WriteFile(path, []byte("old"), 0o600))
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	boom := errors.New("boom")
	err = Write(path, 0o644, func(f *os.File) error {
		_, _ = f.Write([]byte("half"))
		return boom
	})
	require.ErrorIs(t, err, boom)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "old", string(got), "a failed write leaves the old content")

	require.NoError(t, WriteFile(path, []byte("new"), 0o644))
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "new", string(got))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left behind")
}

// Two writers of the same path never share a temporary file: each rename installs a whole content.
func TestConcurrentWritersDoNotShareATemporaryFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "exit.json")
	errs := make(chan error, 2)
	for _, content := range []string{"aaaaaaaa", "bbbbbbbb"} {
		go func() { errs <- WriteFile(path, []byte(content), 0o644) }()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, []string{"aaaaaaaa", "bbbbbbbb"}, string(got))
}

// A fill that panics leaves neither a temporary file nor a changed path.
func TestWritePanickingFillLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x")
	require.NoError(t, WriteFile(path, []byte("old"), 0o644, Volatile))
	assert.Panics(t, func() { _ = Write(path, 0o644, func(*os.File) error { panic("boom") }) })
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "old", string(got))
}
