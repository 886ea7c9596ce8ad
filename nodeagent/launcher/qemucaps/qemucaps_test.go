package qemucaps

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const name = "926803a9278e445ec919c2b6cbd8c1c449c75b26dcb1686b774314180376c725.xml"

func TestValidName(t *testing.T) {
	assert.True(t, ValidName(name))
	for _, bad := range []string{"", "x.xml", strings.ToUpper(name), "../" + name, name + ".tmp", strings.TrimSuffix(name, ".xml")} {
		assert.False(t, ValidName(bad), bad)
	}
}

// Install writes what is missing, keeps what libvirt has, and refuses a name that is not a cache
// file's before writing anything; Read returns the cache files only.
func TestInstallAndRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache", "qemu", "capabilities")
	other := strings.Repeat("a", 64) + ".xml"
	require.NoError(t, Install(dir, map[string][]byte{name: []byte("<qemuCaps/>")}, 0o600))
	require.NoError(t, Install(dir, map[string][]byte{name: []byte("newer"), other: []byte("<other/>")}, 0o600))
	got, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	assert.Equal(t, "<qemuCaps/>", string(got), "a file libvirt has is kept")
	fi, err := os.Stat(filepath.Join(dir, other))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	err = Install(dir, map[string][]byte{strings.Repeat("b", 64) + ".xml": nil, "../escape.xml": []byte("x")}, 0o600)
	assert.ErrorContains(t, err, `qemuCapabilities["../escape.xml"]: not a capabilities cache file`)
	assert.NoFileExists(t, filepath.Join(dir, strings.Repeat("b", 64)+".xml"), "nothing written when one file is refused")
	assert.ErrorContains(t, Install(dir, map[string][]byte{other: make([]byte, MaxFile+1)}, 0o600), "not a capabilities cache file")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o600))
	files, err := Read(dir)
	require.NoError(t, err)
	assert.Equal(t, map[string][]byte{name: []byte("<qemuCaps/>"), other: []byte("<other/>")}, files)
	_, err = Read(filepath.Join(dir, "missing"))
	assert.Error(t, err)
}

// ForDefaultCPU drops exactly the cpu-unavailable-features flag, whatever the quotes, from files
// libvirt 9 wrote, leaves other libvirts' files and the given files as they were.
func TestForDefaultCPU(t *testing.T) {
	probed := "<qemuCaps>\n  <selfvers>9000000</selfvers>\n  <flag name='x86-max-cpu'/>\n  <flag name='cpu-unavailable-features'/>\n  <flag name='canonical-cpu-features'/>\n</qemuCaps>\n"
	newer := "<qemuCaps>\n  <selfvers>11005000</selfvers>\n  <flag name='cpu-unavailable-features'/>\n</qemuCaps>\n"
	files := map[string][]byte{name: []byte(probed), "b.xml": []byte("<selfvers>9010000</selfvers>\n<flag name=\"cpu-unavailable-features\"/>\r\n<x/>"), "c.xml": []byte(newer)}
	got := ForDefaultCPU(files)
	assert.Equal(t, "<qemuCaps>\n  <selfvers>9000000</selfvers>\n  <flag name='x86-max-cpu'/>\n  <flag name='canonical-cpu-features'/>\n</qemuCaps>\n", string(got[name]))
	assert.Equal(t, "<selfvers>9010000</selfvers>\n<x/>", string(got["b.xml"]))
	assert.Equal(t, newer, string(got["c.xml"]), "another libvirt's file is kept as it is")
	assert.Equal(t, probed, string(files[name]), "the given files are not changed")
	assert.Empty(t, ForDefaultCPU(nil))
}
