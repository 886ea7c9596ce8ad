package isoimage

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A ConfigMap volume as the kubelet lays it out: keys are symlinks through ..data to a timestamped
// directory; only the keys become files.
func TestFromDirReadsTheKeysOfAKubernetesVolume(t *testing.T) {
	dir := t.TempDir()
	ts := filepath.Join(dir, "..2026_11_23_05_30_00.1")
	require.NoError(t, os.Mkdir(ts, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ts, "greeting"), []byte("hello"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ts, "config.json"), []byte("{}"), 0o644))
	require.NoError(t, os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data")))
	require.NoError(t, os.MkdirAll(filepath.Join(ts, "labels"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ts, "labels", "app"), []byte("web"), 0o644))
	for _, k := range []string{"greeting", "config.json", "labels"} {
		require.NoError(t, os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k)))
	}
	files, err := FromDir(dir)
	require.NoError(t, err)
	assert.ElementsMatch(t, []File{{Name: "config.json", Data: []byte("{}")}, {Name: "greeting", Data: []byte("hello")}, {Name: "labels/app", Data: []byte("web")}}, files)

	iso := filepath.Join(t.TempDir(), "cfg.iso")
	require.NoError(t, Write(iso, "cfgdata", files))
	st, err := os.Stat(iso)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, st.Size(), int64(MinSize))
}
