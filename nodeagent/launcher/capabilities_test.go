package launcher

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/podvirt/podvirt/nodeagent/launcher/qemucaps"
)

// A sync's qemu capabilities are installed and end the warm-up's wait; when they cannot be
// installed the launcher says so and goes on (libvirt probes): never the instance's failure.
func TestTakeCapabilities(t *testing.T) {
	name := "926803a9278e445ec919c2b6cbd8c1c449c75b26dcb1686b774314180376c725.xml"
	root := t.TempDir()
	var log bytes.Buffer
	g := newGuest(&Config{LibvirtRoot: root, Log: slog.New(slog.NewTextHandler(&log, nil))}, nil)
	g.takeCapabilities(map[string][]byte{name: []byte("<qemuCaps/>")})
	got, err := os.ReadFile(filepath.Join(qemucaps.Dir(root), name))
	assert.NoError(t, err)
	assert.Equal(t, "<qemuCaps/>", string(got))
	select {
	case <-g.synced:
	default:
		t.Error("the warm-up still waits after a sync")
	}

	blocked := filepath.Join(t.TempDir(), "file")
	assert.NoError(t, os.WriteFile(blocked, nil, 0o600))
	g = newGuest(&Config{LibvirtRoot: blocked, Log: slog.New(slog.NewTextHandler(&log, nil))}, nil)
	g.takeCapabilities(map[string][]byte{name: []byte("<qemuCaps/>")})
	g.takeCapabilities(nil) // a second sync: closed once
	assert.Contains(t, log.String(), "Not using the node's qemu capabilities")
}
