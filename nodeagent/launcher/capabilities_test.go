package launcher

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"libvirt.org/go/libvirtxml"

	"github.com/podvirt/podvirt/nodeagent/launcher/qemucaps"
)

// A sync ends the warm-up's wait (once, however many come); the capabilities it brought are
// installed before the start, without the cpu-unavailable-features flag only for a guest with the
// emulator's default CPU; when they cannot be installed the launcher says so and goes on (libvirt
// probes): never the instance's failure.
func TestInstallCapabilities(t *testing.T) {
	name := "926803a9278e445ec919c2b6cbd8c1c449c75b26dcb1686b774314180376c725.xml"
	probed := map[string][]byte{name: []byte("<qemuCaps>\n  <selfvers>9000000</selfvers>\n  <flag name='cpu-unavailable-features'/>\n</qemuCaps>\n")}
	var log bytes.Buffer
	newG := func(root string) *guest {
		return newGuest(&Config{LibvirtRoot: root, Log: slog.New(slog.NewTextHandler(&log, nil))}, nil)
	}
	installed := func(root string) string {
		got, err := os.ReadFile(filepath.Join(qemucaps.Dir(root), name))
		assert.NoError(t, err)
		return string(got)
	}

	root := t.TempDir()
	g := newG(root)
	g.markSynced()
	g.markSynced() // a second sync: closed once
	select {
	case <-g.synced:
	default:
		t.Error("the warm-up still waits after a sync")
	}
	g.installCapabilities(probed, &libvirtxml.Domain{Type: "qemu", CPU: &libvirtxml.DomainCPU{}})
	assert.Equal(t, "<qemuCaps>\n  <selfvers>9000000</selfvers>\n</qemuCaps>\n", installed(root), "default CPU under emulation: the short CPU reading")

	for what, dom := range map[string]*libvirtxml.Domain{
		"KVM":         {Type: "kvm", CPU: &libvirtxml.DomainCPU{Mode: "host-model"}},
		"a CPU model": {Type: "qemu", CPU: &libvirtxml.DomainCPU{Model: &libvirtxml.DomainCPUModel{Value: "Westmere"}}},
	} {
		root := t.TempDir()
		newG(root).installCapabilities(probed, dom)
		assert.Equal(t, string(probed[name]), installed(root), what+": the files as probed")
	}

	blocked := filepath.Join(t.TempDir(), "file")
	assert.NoError(t, os.WriteFile(blocked, nil, 0o600))
	newG(blocked).installCapabilities(probed, &libvirtxml.Domain{Type: "qemu"})
	assert.Contains(t, log.String(), "Not using the node's qemu capabilities")
}
