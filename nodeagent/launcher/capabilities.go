package launcher

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/podvirt/podvirt/nodeagent/launcher/domainxml"
	"github.com/podvirt/podvirt/nodeagent/launcher/qemucaps"
)

// ProbeCapabilities has the embedded driver rooted at root probe qemu (the default emulator, the
// one a launcher's domains use) and copies the cache file it wrote into out, for the node agent to
// send with each sync (see package qemucaps).
func ProbeCapabilities(root, out string) error {
	if err := writeQemuConf(filepath.Join(root, "etc", "qemu.conf"), ""); err != nil {
		return err
	}
	events, err := startEventLoop() // the embedded driver wants one
	if err != nil {
		return err
	}
	defer events.close()
	conn, err := libvirt.NewConnect(EmbedURI(root))
	if err != nil {
		return fmt.Errorf("open %s: %w", EmbedURI(root), err)
	}
	_, err = conn.GetDomainCapabilities("", "", "", "", 0)
	_, _ = conn.Close()
	if err != nil {
		return fmt.Errorf("probe qemu: %w", err)
	}
	files, err := qemucaps.Read(qemucaps.Dir(root))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("libvirt cached no capabilities in %s", qemucaps.Dir(root))
	}
	return qemucaps.Install(out, files, 0o644)
}

// warmUpDelay is how long a new launcher waits for the node agent's sync (which brings qemu's
// capabilities) before it probes qemu itself.
const warmUpDelay = 500 * time.Millisecond

// warmUp has libvirt probe qemu's capabilities while the launcher waits for the node agent's
// sync, unless the sync comes first: it brings the node's cached capabilities (or the start probes).
func warmUp(ctx context.Context, cfg *Config, hv *hypervisor, synced <-chan struct{}) {
	select {
	case <-ctx.Done():
		return
	case <-synced:
		return
	case <-time.After(warmUpDelay):
	}
	start := time.Now()
	if _, err := hv.conn.GetDomainCapabilities("", "", "", "", 0); err != nil {
		cfg.Log.Info("Probing qemu's capabilities ahead failed (the first start probes them)", "err", err)
		return
	}
	cfg.Log.Info("Probed qemu's capabilities", "took", time.Since(start).Round(time.Millisecond).String())
}

// markSynced tells warmUp the node agent's first sync has come: it brings the node's cached qemu
// capabilities, installed by the start itself (installCapabilities), or the start probes.
func (g *guest) markSynced() { g.syncedOnce.Do(func() { close(g.synced) }) }

// installCapabilities installs the node's cached qemu capabilities a sync brought, right before
// the guest's start, trimmed for a guest with the emulator's default CPU (qemucaps.ForDefaultCPU).
// A failure is logged: libvirt then probes qemu itself, as without them.
func (g *guest) installCapabilities(files map[string][]byte, dom *libvirtxml.Domain) {
	if len(files) == 0 {
		return
	}
	if domainxml.EmulatorDefaultCPU(dom) {
		files = qemucaps.ForDefaultCPU(files)
	}
	if err := qemucaps.Install(qemucaps.Dir(g.cfg.LibvirtRoot), files, 0o600); err != nil {
		g.cfg.Log.Info("Not using the node's qemu capabilities: libvirt probes qemu itself", "err", err)
	}
}
