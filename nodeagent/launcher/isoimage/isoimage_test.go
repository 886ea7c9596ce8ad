package isoimage

import (
	"os"
	"path/filepath"
	"strings"
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

// The ISO writer makes a malformed image of a directory whose name begins with a dot (FuzzWrite
// found it: readers refuse the image): such names are refused, naming them; files named so are
// fine.
func TestDotDirectoriesAreRefused(t *testing.T) {
	for _, name := range []string{".0/0", "x/.y/z", ".ssh/authorized_keys"} {
		err := Write(filepath.Join(t.TempDir(), "i.iso"), "cfgdata", []File{{Name: name, Data: []byte("0")}})
		if err == nil || !strings.Contains(err.Error(), "begins with a dot") || !strings.Contains(err.Error(), name) {
			t.Errorf("Write(%q) = %v, want a refusal naming it", name, err)
		}
	}
	for _, name := range []string{".env", "a/.0", "..data-like"} {
		if err := Write(filepath.Join(t.TempDir(), "i.iso"), "cfgdata", []File{{Name: name, Data: []byte("0")}}); err != nil {
			t.Errorf("Write(%q) = %v", name, err)
		}
	}
}

// Names longer than MaxNameBytes come out malformed or cut short (FuzzWrite found it): refused,
// naming the limit.
func TestLongNamesAreRefused(t *testing.T) {
	iso := filepath.Join(t.TempDir(), "i.iso")
	if err := Write(iso, "cfgdata", []File{{Name: "d/" + strings.Repeat("a", MaxNameBytes), Data: []byte("0")}}); err != nil {
		t.Errorf("a name of %d bytes: %v", MaxNameBytes, err)
	}
	err := Write(iso, "cfgdata", []File{{Name: "d/" + strings.Repeat("a", MaxNameBytes+1), Data: []byte("0")}})
	if err == nil || !strings.Contains(err.Error(), "longer than 100 bytes") {
		t.Errorf("a name of %d bytes: %v, want a refusal naming the limit", MaxNameBytes+1, err)
	}
}

// Names deeper than ISO 9660's eight levels make an image go-diskfs cannot read (FuzzWrite found
// it): refused, naming the limit.
func TestDeepNamesAreRefused(t *testing.T) {
	iso := filepath.Join(t.TempDir(), "i.iso")
	deepest := strings.TrimSuffix(strings.Repeat("d/", MaxDepth), "/")
	if err := Write(iso, "cfgdata", []File{{Name: deepest, Data: []byte("0")}}); err != nil {
		t.Fatalf("%q: %v", deepest, err)
	}
	if _, err := readImage(t, iso).OpenFile("/"+deepest, os.O_RDONLY); err != nil {
		t.Errorf("%q, %d levels deep, does not read back: %v", deepest, MaxDepth, err)
	}
	err := Write(iso, "cfgdata", []File{{Name: deepest + "/f", Data: []byte("0")}})
	if err == nil || !strings.Contains(err.Error(), "9 levels deep, an ISO disk holds at most 8") {
		t.Errorf("a name %d levels deep: %v, want a refusal naming the limit", MaxDepth+1, err)
	}
}
