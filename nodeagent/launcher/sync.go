package launcher

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/nodeagent/launcher/domainxml"
)

// sync defines and starts the domain on the first request; later requests for the same VMI only
// report the status.
func (g *guest) sync(ctx context.Context, req launcherv1.SyncRequest) error {
	vmi, err := g.parseVMI(req)
	if err != nil {
		return err
	}
	if g.dom != nil {
		if vmi.UID != g.vmi.UID {
			return fmt.Errorf("%w: vmi: a guest for uid %s already runs here, not %s", errConflict, g.vmi.UID, vmi.UID)
		}
		return nil
	}
	if g.shutdownReq {
		return fmt.Errorf("%w: the launcher is terminating", errConflict)
	}
	t0 := time.Now()
	plan, err := g.prepare(ctx, vmi, req.Emulation)
	if err != nil {
		return err
	}
	x, err := plan.Domain.Marshal()
	if err != nil {
		return fmt.Errorf("marshal domain: %w", err)
	}
	g.installCapabilities(req.QemuCapabilities, plan.Domain)
	t1 := time.Now()
	dom, err := g.hv.conn.DomainCreateXML(x, libvirt.DOMAIN_START_PAUSED)
	if err != nil {
		if refusedConfig(err) { // the same instance would be refused again: fail it, saying why
			return fmt.Errorf("%w: libvirt cannot run this instance: %w", errBadRequest, err)
		}
		return fmt.Errorf("start domain: %w", err)
	}
	t2 := time.Now()
	if err := g.afterCreate(dom, vmi, plan); err != nil {
		_ = dom.Destroy()
		_ = dom.Free()
		return err
	}
	g.dom, g.vmi, g.emulation = dom, vmi, req.Emulation
	g.started.Store(true)
	g.cfg.Log.Info("Guest started", "domain", plan.Domain.Name, "emulation", req.Emulation,
		"prepare", t1.Sub(t0).Round(time.Millisecond).String(), "start", time.Since(t1).Round(time.Millisecond).String(),
		"create", t2.Sub(t1).Round(time.Millisecond).String(), "memory", g.memMessage)
	g.refresh()
	return nil
}

// prepare builds the domain of vmi and creates the files it needs (disk overlays, ISOs, persistent
// state): what a sync does before it starts the guest, and a migration target before the guest arrives.
func (g *guest) prepare(ctx context.Context, vmi *virtv1.VirtualMachineInstance, emulation bool) (*domainxml.Plan, error) {
	in, err := resolveInputs(vmi, g.cfg, emulation)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBadRequest, err)
	}
	plan, err := domainxml.Build(vmi, in)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBadRequest, err)
	}
	if err := prepareFiles(ctx, vmi, plan, g.cfg); err != nil {
		return nil, err
	}
	if err := preparePersistentState(g.cfg, &vmi.Spec, plan.Domain.UUID); err != nil {
		return nil, err
	}
	for _, s := range []string{launcherv1.SerialSocket, launcherv1.VNCSocket, launcherv1.GuestAgentSocket} {
		if err := os.Remove(filepath.Join(g.cfg.PrivateDir, s)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("remove stale %s: %w", s, err)
		}
	}
	return plan, nil
}

// afterCreate forwards the declared ports, records what qemu got, and lets the guest run (unless it
// is to start paused).
func (g *guest) afterCreate(dom *libvirt.Domain, vmi *virtv1.VirtualMachineInstance, plan *domainxml.Plan) error {
	if err := g.attach(dom, plan); err != nil {
		return err
	}
	if vmi.Spec.StartStrategy != nil && *vmi.Spec.StartStrategy == virtv1.StartStrategyPaused {
		return nil
	}
	if err := dom.Resume(); err != nil {
		return fmt.Errorf("resume after start: %w", err)
	}
	return nil
}

// attach forwards the declared ports to the new domain and records what qemu got.
func (g *guest) attach(dom *libvirt.Domain, plan *domainxml.Plan) error {
	live, err := liveDomain(dom)
	if err != nil {
		return err
	}
	netdevs, err := netdevNames(live, plan)
	if err != nil {
		return err
	}
	if err := forwardPorts(dom, netdevs, plan); err != nil {
		return err
	}
	g.forwards = map[int]int{}
	for _, p := range plan.Ports {
		if p.Protocol == "tcp" {
			g.forwards[int(p.Port)] = int(p.Port)
		}
	}
	if plan.PodInterface != "" {
		g.netdev = netdevs[plan.PodInterface]
	}
	g.ifaces = interfaces(plan, live)
	g.memMessage = memoryMessage(plan.MemoryBytes, live)
	return nil
}

// forwardPorts adds one slirp host forward per declared port: Pod address:port → guest:port. libvirt
// has no XML for it with the slirp backend (its <portForward> is passt-only and libvirt 9.0 has no
// passt), so it goes through qemu's monitor while the guest is still paused.
func forwardPorts(dom *libvirt.Domain, netdev map[string]string, plan *domainxml.Plan) error {
	for _, p := range plan.Ports {
		cmd := fmt.Sprintf("hostfwd_add %s %s::%d-:%d", netdev[p.Interface], p.Protocol, p.Port, p.Port)
		out, err := dom.QemuMonitorCommand(cmd, libvirt.DOMAIN_QEMU_MONITOR_COMMAND_HMP)
		if err != nil {
			return fmt.Errorf("forward %s port %d: %w", p.Protocol, p.Port, err)
		}
		if out = strings.TrimSpace(out); out != "" { // HMP reports failures as text
			return fmt.Errorf("forward %s port %d: %s", p.Protocol, p.Port, out)
		}
	}
	return nil
}

// netdevNames maps each spec interface name to qemu's id of its network backend.
func netdevNames(live *libvirtxml.Domain, plan *domainxml.Plan) (map[string]string, error) {
	netdev := map[string]string{}
	for i, nic := range live.Devices.Interfaces {
		if nic.Alias == nil || i >= len(plan.InterfaceNames) {
			return nil, errors.New("forward ports: libvirt gave the interfaces no alias")
		}
		netdev[plan.InterfaceNames[i]] = "host" + nic.Alias.Name
	}
	return netdev, nil
}

// interfaces is what Status reports about the NICs: spec name, MAC libvirt uses, and for those on
// the pod network the Pod's addresses (user-mode networking is masquerade: the guest is reached at
// the Pod's IPs; a bridged guest's own addresses are its business).
func interfaces(plan *domainxml.Plan, live *libvirtxml.Domain) []launcherv1.Interface {
	var out []launcherv1.Interface
	ips := podIPs()
	for i, nic := range live.Devices.Interfaces {
		var it launcherv1.Interface
		if i < len(plan.InterfaceNames) {
			it.Name = plan.InterfaceNames[i]
		}
		if nic.Source == nil || nic.Source.Ethernet == nil {
			it.IPs = ips
		}
		if nic.MAC != nil {
			it.MAC = nic.MAC.Address
		}
		out = append(out, it)
	}
	return out
}

// podIPs are the global unicast addresses of the Pod's primary interface (eth0, the name the
// container runtime gives the cluster network's interface; Multus' are named after their networks).
func podIPs() []string {
	eth0, err := net.InterfaceByName("eth0")
	if err != nil {
		return nil
	}
	addrs, err := eth0.Addrs()
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.IsGlobalUnicast() {
			out = append(out, n.IP.String())
		}
	}
	return out
}

// memoryMessage says what memory the spec asked for and what libvirt/qemu actually gave the guest.
func memoryMessage(asked int64, live *libvirtxml.Domain) string {
	if live.Memory == nil {
		return ""
	}
	got := int64(live.Memory.Value) * unitBytes(live.Memory.Unit)
	return fmt.Sprintf("guest memory: asked %d bytes, qemu got %d bytes (%.2f MiB)", asked, got, float64(got)/(1<<20))
}

func unitBytes(unit string) int64 {
	switch unit {
	case "b", "bytes":
		return 1
	case "", "KiB", "k":
		return 1 << 10
	case "MiB", "M":
		return 1 << 20
	case "GiB", "G":
		return 1 << 30
	}
	return 1
}

// refusedConfig reports whether libvirt refused the domain's configuration itself (unsupported or
// invalid), as opposed to failing to start it.
func refusedConfig(err error) bool {
	var lerr libvirt.Error
	if !errors.As(err, &lerr) {
		return false
	}
	switch lerr.Code {
	case libvirt.ERR_CONFIG_UNSUPPORTED, libvirt.ERR_XML_ERROR, libvirt.ERR_XML_DETAIL, libvirt.ERR_INVALID_ARG:
		return true
	}
	return false
}
