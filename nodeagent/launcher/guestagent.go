package launcher

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"libvirt.org/go/libvirt"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/termsafe"
	"github.com/podvirt/podvirt/nodeagent/launcher/domainxml"
)

// The qemu guest agent: libvirt holds the channel domainxml.GuestAgentChannel and is the only one
// talking to the agent; the launcher asks libvirt. What the guest answers is hostile input: it is
// bounded and decoded into fixed shapes before it leaves the launcher. Calls that wait on the guest
// run on the caller's goroutine, on a reference to the domain the loop hands out (opAgent), so a slow
// or silent agent delays its caller only, never the loop.

// agentTimeoutSeconds is how long libvirt waits for one answer of the guest agent.
const agentTimeoutSeconds = 10

// errNoAgent refuses a guest agent call while no agent is connected.
var errNoAgent = errors.New("the guest agent is not connected: the guest runs no qemu-guest-agent on the " +
	domainxml.GuestAgentChannel + " port, or it has not started yet")

// errRebootUnderway refuses a reboot while one through the guest agent is under way.
var errRebootUnderway = conflict{errors.New("a reboot through the guest agent is under way")}

// errExecTimeout marks an exec whose command did not exit within its timeout (HTTP 504).
var errExecTimeout = errors.New("timed out")

// agentConnected reports whether the guest agent has its channel open, as libvirt's live XML says.
func agentConnected(dom *libvirt.Domain) bool {
	x, err := dom.GetXMLDesc(0)
	if err != nil {
		return false
	}
	var d struct {
		Channels []struct {
			Target struct {
				Name  string `xml:"name,attr"`
				State string `xml:"state,attr"`
			} `xml:"target"`
		} `xml:"devices>channel"`
	}
	if xml.Unmarshal([]byte(x), &d) != nil {
		return false
	}
	for _, c := range d.Channels {
		if c.Target.Name == domainxml.GuestAgentChannel {
			return c.Target.State == "connected"
		}
	}
	return false
}

// agentPurpose is what a lent domain is for: the checks it passes first.
type agentPurpose int

const (
	forQuery  agentPurpose = iota // info, exec, unfreeze: any running guest
	forFreeze                     // not while the guest migrates: the target would not know it is frozen
	forReboot                     // as an ACPI reboot (press); the caller starts a goroutine of agentCalls
)

// agentDomain returns a new reference to the domain for a guest agent call (the caller frees it),
// refused while no agent is connected. A caller that gave up before the loop took the request gets
// nothing; once taken, the loop's answer (at once) is always read, so a lent reference is never lost.
func (g *guest) agentDomain(ctx context.Context, purpose agentPurpose) (*libvirt.Domain, error) {
	var dom *libvirt.Domain
	r := request{op: opAgent, agentDom: &dom, agentFor: purpose, reply: make(chan error, 1)}
	select {
	case g.reqs <- r:
	case <-g.done:
		return nil, fmt.Errorf("%w: the guest has ended", errConflict)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := <-r.reply; err != nil {
		return nil, err
	}
	return dom, nil
}

// lendFor is opAgent on the loop: a reference to the running domain for purpose, with libvirt's
// wait for the agent bounded.
func (g *guest) lendFor(purpose agentPurpose, out **libvirt.Domain) error {
	lend := func() error {
		if !g.agentUp {
			return errNoAgent
		}
		if err := g.dom.AgentSetResponseTimeout(agentTimeoutSeconds, 0); err != nil {
			return fmt.Errorf("guest agent timeout: %w", err)
		}
		if err := g.dom.Ref(); err != nil {
			return fmt.Errorf("domain reference: %w", err)
		}
		d := *g.dom
		*out = &d
		return nil
	}
	switch purpose {
	case forReboot:
		err := g.press("rebooted", lend)
		if err == nil {
			g.agentCalls.Add(1)
		}
		return err
	case forFreeze:
		switch {
		case g.migrating || g.target != nil:
			return errors.New("the guest is migrating: its file systems cannot be frozen until the migration ends")
		case g.frozen || g.freezing > 0:
			return errors.New("the guest's file systems are frozen already (unfreeze first)")
		}
		err := lend()
		if err == nil {
			g.freezing++ // until opFreezeDone: no migration meanwhile
		}
		return err
	}
	return lend()
}

// agentRefresh is how often what the agent reports (the OS, the NICs' names and addresses) is
// fetched again while it stays connected.
const agentRefresh = 30 * time.Second

// followAgent notes the agent's connection at a refresh. On connecting, and every agentRefresh while
// connected, what it says of the guest is fetched in the background (the status carries the OS and
// the NICs; one such fetch at a time, so a guest opening and closing its port costs little); on
// connecting, a guest counted as frozen is asked whether it still is (a reboot thaws it). Going away
// changes nothing else: the file systems of a guest whose agent stopped stay frozen, and the thaw
// timer runs on.
func (g *guest) followAgent(up bool) {
	was := g.agentUp
	g.agentUp = up
	if !up && was { // what it said of the NICs is not true for long: a guest without an agent says nothing
		g.mu.Lock()
		g.guestNICs = nil
		g.mu.Unlock()
	}
	// Not again while a freeze is under way or in effect: the agent answers little then, and a
	// freeze must not wait behind a fetch.
	again := was && (time.Since(g.agentAsked) < agentRefresh || g.frozen || g.freezing > 0)
	if !up || again || !g.agentFetching.CompareAndSwap(false, true) {
		return
	}
	g.agentAsked = time.Now()
	if err := g.dom.AgentSetResponseTimeout(agentTimeoutSeconds, 0); err != nil {
		g.cfg.Log.Error("Guest agent timeout", "err", err)
	}
	if err := g.dom.Ref(); err != nil {
		g.agentFetching.Store(false)
		return
	}
	d, frozen, gen := *g.dom, g.frozen && !was, g.freezeGen
	g.agentCalls.Add(1)
	go func() {
		defer g.agentCalls.Done()
		defer g.agentFetching.Store(false)
		defer func() { _ = d.Free() }()
		ctx, cancel := context.WithTimeout(context.Background(), agentFetchTimeout)
		defer cancel()
		if frozen {
			var state string
			if agentCommand(&d, "guest-fsfreeze-status", nil, &state) == nil && state == "thawed" {
				_ = g.do(ctx, request{op: opThawed, freezeGen: gen})
			}
		}
		if _, err := g.fetchAgentInfo(ctx, &d, true); err != nil && !was {
			g.cfg.Log.Info("The guest agent connected but did not say what the guest runs", "err", err)
		}
	}()
}

// rebootThroughAgent asks the guest agent to reboot the guest and returns once the request is under
// way: libvirt waits for the guest's reset (up to a minute for a guest that does not reboot), so it
// runs on its own goroutine of agentCalls, one at a time. When the agent fails, the ACPI button is
// pressed instead. An error: nothing was started (the caller presses the button).
func (g *guest) rebootThroughAgent(ctx context.Context) error {
	if !g.agentReboot.CompareAndSwap(false, true) {
		return errRebootUnderway
	}
	dom, err := g.agentDomain(ctx, forReboot) // counted in agentCalls by the loop
	if err != nil {
		g.agentReboot.Store(false)
		return err
	}
	go func() {
		defer g.agentCalls.Done()
		defer g.agentReboot.Store(false)
		defer func() { _ = dom.Free() }()
		err := dom.Reboot(libvirt.DOMAIN_REBOOT_GUEST_AGENT)
		if err == nil {
			return
		}
		g.cfg.Log.Warn("Reboot through the guest agent failed: pressing the ACPI button", "err", err)
		if err := g.do(context.Background(), request{op: opReboot}); err != nil {
			g.cfg.Log.Error("ACPI reboot", "err", err)
		}
	}()
	return nil
}

// agentCommand sends one QMP command to the guest agent and decodes its "return" into out.
func agentCommand(dom *libvirt.Domain, execute string, args, out any) error {
	cmd, err := json.Marshal(struct {
		Execute   string `json:"execute"`
		Arguments any    `json:"arguments,omitempty"`
	}{execute, args})
	if err != nil {
		return fmt.Errorf("encode %s: %w", execute, err)
	}
	reply, err := dom.QemuAgentCommand(string(cmd), libvirt.DomainQemuAgentCommandTimeout(agentTimeoutSeconds), 0)
	if err != nil {
		return agentError(execute, err)
	}
	var r struct {
		Return json.RawMessage `json:"return"`
	}
	if err := json.Unmarshal([]byte(reply), &r); err != nil || r.Return == nil {
		return fmt.Errorf("guest agent %s: malformed answer", execute)
	}
	if err := json.Unmarshal(r.Return, out); err != nil {
		return fmt.Errorf("guest agent %s: malformed answer: %w", execute, err)
	}
	return nil
}

// agentError is a failed guest agent call as the guest's agent explained it (libvirt's wrapping
// removed, control characters shown as ?: the text comes from the guest): a conflict, the guest
// refused; or errAgentUnavailable when the agent did not answer in time.
func agentError(what string, err error) error {
	msg := err.Error()
	var lerr libvirt.Error
	if errors.As(err, &lerr) {
		switch lerr.Code {
		case libvirt.ERR_AGENT_UNRESPONSIVE, libvirt.ERR_OPERATION_TIMEOUT, libvirt.ERR_AGENT_UNSYNCED:
			return fmt.Errorf("%w: guest agent %s: the agent did not answer in time", errAgentUnavailable, what)
		}
		msg = lerr.Message
		if _, why, ok := strings.Cut(msg, "error was '"); ok {
			msg = strings.TrimSuffix(why, "'")
		}
	}
	return conflict{fmt.Errorf("guest agent %s: %s", what, termsafe.Line(bound(msg)))}
}

// errAgentUnavailable marks a guest agent that did not answer (HTTP 503).
var errAgentUnavailable = errors.New("guest agent unavailable")

// Fetching what the agent reports: at most one fetch at a time per guest, answers younger than
// agentInfoFresh served from the cache (so any number of readers cost the guest one fetch every few
// seconds), each fetch bounded by agentFetchTimeout.
const (
	agentInfoFresh    = 2 * time.Second
	agentFetchTimeout = time.Minute
)

// guestAgentInfo is what the guest agent reports, in KubeVirt's shape.
func (g *guest) guestAgentInfo(ctx context.Context) (*virtv1.VirtualMachineInstanceGuestAgentInfo, error) {
	info := g.cachedAgentInfo(agentInfoFresh)
	if info == nil {
		dom, err := g.agentDomain(ctx, forQuery)
		if err != nil {
			return nil, err
		}
		defer func() { _ = dom.Free() }()
		if info, err = g.fetchAgentInfo(ctx, dom, false); err != nil {
			return nil, err
		}
	}
	info.FSFreezeStatus = ""
	if g.Status().Frozen {
		info.FSFreezeStatus = virtv1.FSFrozen
	}
	return info, nil
}

// fetchAgentInfo asks the agent (one fetch at a time: a caller that waited for another's gets its
// answer) and caches the answer. A frozen guest's agent answers little more than guest-info: the
// rest is what it said before the freeze.
func (g *guest) fetchAgentInfo(ctx context.Context, dom *libvirt.Domain, again bool) (*virtv1.VirtualMachineInstanceGuestAgentInfo, error) {
	select {
	case g.agentFetch <- struct{}{}:
		defer func() { <-g.agentFetch }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if info := g.cachedAgentInfo(agentInfoFresh); info != nil && !again {
		return info, nil
	}
	var agent struct {
		Version  string `json:"version"`
		Commands []struct {
			Name    string `json:"name"`
			Enabled bool   `json:"enabled"`
		} `json:"supported_commands"`
	}
	if err := agentCommand(dom, "guest-info", nil, &agent); err != nil {
		return nil, err
	}
	info := g.cachedAgentInfo(-1)
	info.GAVersion, info.SupportedCommands = bound(agent.Version), nil
	for i, c := range agent.Commands {
		if i == maxGuestItems {
			break
		}
		info.SupportedCommands = append(info.SupportedCommands, virtv1.GuestAgentCommandInfo{Name: bound(c.Name), Enabled: c.Enabled})
	}
	if g.Status().Frozen {
		return info, nil // not cached: the rest is the earlier answer's
	}
	const what = libvirt.DOMAIN_GUEST_INFO_USERS | libvirt.DOMAIN_GUEST_INFO_OS | libvirt.DOMAIN_GUEST_INFO_TIMEZONE |
		libvirt.DOMAIN_GUEST_INFO_HOSTNAME | libvirt.DOMAIN_GUEST_INFO_FILESYSTEM
	gi, err := dom.GetGuestInfo(what|libvirt.DOMAIN_GUEST_INFO_INTERFACES, 0)
	if err != nil { // an agent that does not list its NICs says the rest
		gi, err = dom.GetGuestInfo(what, 0)
	}
	if err != nil {
		return nil, agentError("guest info", err)
	}
	fillGuestInfo(info, gi)
	nics := guestNICs(gi.Interfaces)
	g.mu.Lock()
	g.agentInfo, g.agentInfoAt, g.guestNICs = info.DeepCopy(), time.Now(), nics
	g.mu.Unlock()
	return info, nil
}

// guestNICs are the guest's NICs as the agent lists them (loopback left out), bounded.
func guestNICs(in []libvirt.DomainGuestInfoInterface) []launcherv1.Interface {
	var out []launcherv1.Interface
	for _, nic := range in {
		if len(out) == maxGuestItems {
			break
		}
		if nic.Hwaddr == "" || nic.Hwaddr == "00:00:00:00:00:00" {
			continue
		}
		it := launcherv1.Interface{GuestName: bound(nic.Name), MAC: strings.ToLower(bound(nic.Hwaddr))}
		for _, a := range nic.Addrs {
			ip, err := netip.ParseAddr(a.Addr)
			switch {
			case len(it.GuestIPs) == launcherv1.MaxIPsPerInterface:
			case err != nil || ip.IsLinkLocalUnicast() || ip.IsLoopback(): // as KubeVirt: the addresses others reach it at
			default:
				it.GuestIPs = append(it.GuestIPs, ip.String())
			}
		}
		out = append(out, it)
	}
	return out
}

// withGuestNICs is nics with the name and addresses the agent reported for each (by MAC), as a copy.
func (g *guest) withGuestNICs(nics []launcherv1.Interface) []launcherv1.Interface {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.guestNICs) == 0 || len(nics) == 0 {
		return nics
	}
	out := slices.Clone(nics)
	for i := range out {
		for _, gn := range g.guestNICs {
			if strings.EqualFold(gn.MAC, out[i].MAC) {
				out[i].GuestName, out[i].GuestIPs = gn.GuestName, gn.GuestIPs
				break
			}
		}
	}
	return out
}

// fillGuestInfo copies libvirt's guest info into info, bounded.
func fillGuestInfo(info *virtv1.VirtualMachineInstanceGuestAgentInfo, gi *libvirt.DomainGuestInfo) {
	info.Hostname, info.Timezone, info.UserList = bound(gi.Hostname), "", nil
	info.OS = virtv1.VirtualMachineInstanceGuestOSInfo{}
	if os := gi.OS; os != nil {
		info.OS = virtv1.VirtualMachineInstanceGuestOSInfo{
			Name: bound(os.Name), KernelRelease: bound(os.KernelRelease), Version: bound(os.Version), PrettyName: bound(os.PrettyName),
			VersionID: bound(os.VersionID), KernelVersion: bound(os.KernelVersion), Machine: bound(os.Machine), ID: bound(os.ID),
		}
	}
	if tz := gi.TimeZone; tz != nil {
		info.Timezone = bound(tz.Name) + ", " + strconv.Itoa(tz.Offset)
	}
	for i, u := range gi.Users {
		if i == maxGuestItems {
			break
		}
		info.UserList = append(info.UserList, virtv1.VirtualMachineInstanceGuestOSUser{
			UserName: bound(u.Name), Domain: bound(u.Domain), LoginTime: float64(u.LoginTime) / 1000,
		})
	}
	info.FSInfo.Filesystems = fileSystems(gi.FileSystems)
}

// cachedAgentInfo is a copy of the agent's last answer when it is younger than fresh (negative:
// any age; nil when there is none, or only an older one; an empty one for any age).
func (g *guest) cachedAgentInfo(fresh time.Duration) *virtv1.VirtualMachineInstanceGuestAgentInfo {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.agentInfo != nil && (fresh < 0 || time.Since(g.agentInfoAt) < fresh):
		return g.agentInfo.DeepCopy()
	case fresh < 0:
		return &virtv1.VirtualMachineInstanceGuestAgentInfo{}
	}
	return nil
}

// guestOS is what the agent last said of the guest's OS (nil before it said anything).
func (g *guest) guestOS() *virtv1.VirtualMachineInstanceGuestOSInfo {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.agentInfo == nil || g.agentInfo.OS == (virtv1.VirtualMachineInstanceGuestOSInfo{}) {
		return nil
	}
	os := g.agentInfo.OS
	return &os
}

// fileSystems are the guest's file systems in KubeVirt's shape (at most maxGuestItems).
func fileSystems(in []libvirt.DomainGuestInfoFileSystem) []virtv1.VirtualMachineInstanceFileSystem {
	out := []virtv1.VirtualMachineInstanceFileSystem{}
	for i, fs := range in {
		if i == maxGuestItems {
			break
		}
		f := virtv1.VirtualMachineInstanceFileSystem{
			DiskName: bound(fs.Name), MountPoint: bound(fs.MountPoint), FileSystemType: bound(fs.FSType),
			UsedBytes: int(min(fs.UsedBytes, 1<<62)), TotalBytes: int(min(fs.TotalBytes, 1<<62)),
		}
		for j, d := range fs.Disks {
			if j == maxGuestItems {
				break
			}
			f.Disk = append(f.Disk, virtv1.VirtualMachineInstanceFileSystemDisk{Serial: bound(d.Serial), BusType: busOf(d.Device)})
		}
		out = append(out, f)
	}
	return out
}

// busOf is a guest disk's bus, from its device name (vda: virtio, sda: scsi or sata).
func busOf(device string) string {
	switch {
	case strings.HasPrefix(device, "/dev/vd"):
		return "virtio"
	case strings.HasPrefix(device, "/dev/sd"):
		return "scsi"
	}
	return ""
}

// Bounds of what the guest agent may report: items of each list and bytes of each string.
const (
	maxGuestItems  = 256
	maxGuestString = 1024
)

// bound cuts a string the guest sent to maxGuestString bytes.
func bound(s string) string {
	if len(s) > maxGuestString {
		return s[:maxGuestString]
	}
	return s
}

// exec runs req's command in the guest and waits, polling the agent, until it exits or its timeout
// passes (the command then runs on: the agent cannot stop it).
func (g *guest) exec(ctx context.Context, req *subv1.ExecRequest) (*subv1.ExecResult, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", errBadRequest, err)
	}
	timeout := launcherv1.ExecTimeout(req)
	dom, err := g.agentDomain(ctx, forQuery)
	if err != nil {
		return nil, err
	}
	defer func() { _ = dom.Free() }()
	args := map[string]any{"path": req.Command[0], "arg": req.Command[1:], "capture-output": true}
	if len(req.Stdin) > 0 {
		args["input-data"] = req.Stdin // encoding/json writes bytes as base64, as the agent wants them
	}
	var started struct {
		PID int `json:"pid"`
	}
	if err := agentCommand(dom, "guest-exec", args, &started); err != nil {
		return nil, err
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	wait := 20 * time.Millisecond
	for {
		var st struct {
			Exited       bool   `json:"exited"`
			ExitCode     int    `json:"exitcode"`
			Signal       int    `json:"signal"`
			Out          []byte `json:"out-data"`
			Err          []byte `json:"err-data"`
			OutTruncated bool   `json:"out-truncated"`
			ErrTruncated bool   `json:"err-truncated"`
		}
		if err := agentCommand(dom, "guest-exec-status", map[string]int{"pid": started.PID}, &st); err != nil {
			return nil, err
		}
		if st.Exited {
			res := &subv1.ExecResult{ExitCode: st.ExitCode, Signal: st.Signal}
			if st.Signal > 0 {
				res.ExitCode = 128 + st.Signal
			}
			res.Stdout, res.StdoutTruncated = cut(st.Out, st.OutTruncated)
			res.Stderr, res.StderrTruncated = cut(st.Err, st.ErrTruncated)
			return res, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return nil, fmt.Errorf("%w: the command did not exit within %s; it still runs in the guest (pid %d)", errExecTimeout, timeout, started.PID)
		case <-time.After(wait):
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// cut bounds an output stream to subv1.MaxExecOutputBytes.
func cut(b []byte, truncated bool) ([]byte, bool) {
	if len(b) > subv1.MaxExecOutputBytes {
		return b[:subv1.MaxExecOutputBytes], true
	}
	return b, truncated
}
