package launcher

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
	"libvirt.org/go/libvirt"
)

// qemuConfUnprivileged is the embedded driver's qemu.conf when the launcher runs as a non-root user:
// qemu runs as the same user, so there is nothing to relabel or chown. "file" makes qemu write the
// serial log and its own log itself instead of going through virtlogd (no extra daemon in the Pod).
const qemuConfUnprivileged = `stdio_handler = "file"
`

// qemuConfPrivileged is qemu.conf for a launcher running as root inside the container (no
// privileges, no extra capabilities): keep qemu as root, do not chown files, no security driver, no
// cgroups (the Pod's cgroup already limits it), no private mount namespace (needs CAP_SYS_ADMIN).
const qemuConfPrivileged = `stdio_handler = "file"
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
cgroup_controllers = [ ]
namespaces = [ ]
`

// lifecycle is one libvirt domain lifecycle event, or the guest's watchdog expiring (watchdog set).
type lifecycle struct {
	event    libvirt.DomainEventType
	detail   int
	watchdog *libvirt.DomainEventWatchdogAction
}

// eventLoop runs libvirt's default event loop, which delivers the events of every connection of
// the process (and keeps remote connections alive).
type eventLoop struct {
	timer int
	stop  chan struct{}
	wg    sync.WaitGroup
}

// startEventLoop registers libvirt's default event loop and runs it until close.
func startEventLoop() (*eventLoop, error) {
	if err := libvirt.EventRegisterDefaultImpl(); err != nil {
		return nil, fmt.Errorf("register libvirt event loop: %w", err)
	}
	l := &eventLoop{stop: make(chan struct{})}
	// A periodic no-op timer wakes the event loop so its goroutine notices stop.
	timer, err := libvirt.EventAddTimeout(200, func(int) {})
	if err != nil {
		return nil, fmt.Errorf("add libvirt event timer: %w", err)
	}
	l.timer = timer
	l.wg.Add(1)
	go l.run()
	return l, nil
}

func (l *eventLoop) run() {
	defer l.wg.Done()
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		if err := libvirt.EventRunDefaultImpl(); err != nil {
			return
		}
	}
}

func (l *eventLoop) close() {
	close(l.stop)
	l.wg.Wait()
	_ = libvirt.EventRemoveTimeout(l.timer)
}

// hypervisor is one connection to libvirt's QEMU driver and its domains' lifecycle events: the
// embedded driver (no daemon, no RPC, the driver's state under a private root) that starts the
// guest, or the libvirt daemon of a migration target the guest arrives in (see daemon). Domains
// it runs die with the launcher: close destroys them.
type hypervisor struct {
	conn       *libvirt.Connect
	events     chan lifecycle
	cbID       int
	watchdogID int
	// runDir is where the driver keeps each domain's pid file (<domain>.pid).
	runDir string
}

// EmbedURI is the connection URI of the embedded QEMU driver rooted at root.
func EmbedURI(root string) string { return "qemu:///embed?root=" + root }

// swtpmSetupConf is swtpm_setup's configuration, which it reads from $XDG_CONFIG_HOME when not root:
// libvirt runs swtpm_setup to manufacture a new TPM's state, and swtpm_localca signs its
// endorsement-key and platform certificates with a CA kept under the embedded driver's root (the
// system one under /var/lib is not writable by the launcher's user). %[1]s is the config directory.
const swtpmSetupConf = `create_certs_tool = /usr/bin/swtpm_localca
create_certs_tool_config = %[1]s/swtpm-localca.conf
create_certs_tool_options = %[1]s/swtpm-localca.options
active_pcr_banks = sha256
`

// swtpmLocalCAConf is swtpm_localca's configuration; %[1]s is the directory of its CA.
const swtpmLocalCAConf = `statedir = %[1]s
signingkey = %[1]s/signkey.pem
issuercert = %[1]s/issuercert.pem
certserial = %[1]s/certserial
`

// swtpmLocalCAOptions describe the platform in the TPM's platform certificate.
const swtpmLocalCAOptions = `--platform-manufacturer Podvirt
--platform-version 2.1
--platform-model QEMU
`

// PrepareLibvirtEnv points the variables the unprivileged driver reads (HOME, XDG_*) at root, so
// nothing is written outside it (a non-root container user often has no writable home), and writes
// the configuration swtpm reads from there. Call it from main before anything else touches libvirt.
func PrepareLibvirtEnv(root string) error {
	for k, sub := range map[string]string{"HOME": "home", "XDG_CACHE_HOME": "home/.cache",
		"XDG_CONFIG_HOME": "home/.config", "XDG_RUNTIME_DIR": "home/.run"} {
		dir := filepath.Join(root, sub)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		if err := os.Setenv(k, dir); err != nil {
			return fmt.Errorf("set %s: %w", k, err)
		}
	}
	config, ca := filepath.Join(root, "home/.config"), filepath.Join(root, "swtpm-localca")
	if err := os.MkdirAll(ca, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", ca, err)
	}
	for name, content := range map[string]string{
		"swtpm_setup.conf":      fmt.Sprintf(swtpmSetupConf, config),
		"swtpm-localca.conf":    fmt.Sprintf(swtpmLocalCAConf, ca),
		"swtpm-localca.options": swtpmLocalCAOptions,
	} {
		if err := os.WriteFile(filepath.Join(config, name), []byte(content), 0o600); err != nil {
			return fmt.Errorf("write swtpm configuration %s: %w", filepath.Join(config, name), err)
		}
	}
	return nil
}

// hugetlbfsMagic is statfs' type of a hugetlbfs.
const hugetlbfsMagic = 0x958458f6

// hugetlbfsConf is the qemu.conf line naming a hugetlbfs mount for guest memory in huge pages, when
// dir is one (the Pod mounts a HugePages emptyDir there when the guest asks for huge pages): the
// unprivileged driver does not look for one in /proc/mounts, and a line naming a directory that is
// not a hugetlbfs would stop the driver from opening.
func hugetlbfsConf(dir string) string {
	var st unix.Statfs_t
	if dir == "" || unix.Statfs(dir, &st) != nil || st.Type != hugetlbfsMagic {
		return ""
	}
	return fmt.Sprintf("hugetlbfs_mount = %q\n", dir)
}

// writeQemuConf writes the QEMU driver's qemu.conf as path; guest memory in huge pages comes from
// the hugetlbfs at hugepagesDir, if it is one.
func writeQemuConf(path, hugepagesDir string) error {
	conf := qemuConfUnprivileged
	if os.Geteuid() == 0 {
		conf = qemuConfPrivileged
	}
	conf += hugetlbfsConf(hugepagesDir)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return fmt.Errorf("write qemu.conf: %w", err)
	}
	return nil
}

// openEmbedded writes qemu.conf under root and opens the embedded driver rooted there.
func openEmbedded(root, hugepagesDir string) (*hypervisor, error) {
	if err := writeQemuConf(filepath.Join(root, "etc", "qemu.conf"), hugepagesDir); err != nil {
		return nil, err
	}
	return connect(EmbedURI(root), filepath.Join(root, "run", "qemu"))
}

// connect opens uri and registers for its domains' lifecycle events (the event loop must run).
func connect(uri, runDir string) (*hypervisor, error) {
	conn, err := libvirt.NewConnect(uri)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", uri, err)
	}
	h := &hypervisor{conn: conn, events: make(chan lifecycle, 64), runDir: runDir}
	h.cbID, err = conn.DomainEventLifecycleRegister(nil, func(_ *libvirt.Connect, _ *libvirt.Domain, ev *libvirt.DomainEventLifecycle) {
		select {
		case h.events <- lifecycle{event: ev.Event, detail: ev.Detail}:
		default: // the run loop also polls the domain state, so a dropped event is not lost for good
		}
	})
	if err != nil {
		_, _ = conn.Close()
		return nil, fmt.Errorf("register lifecycle events on %s: %w", uri, err)
	}
	h.watchdogID, err = conn.DomainEventWatchdogRegister(nil, func(_ *libvirt.Connect, _ *libvirt.Domain, ev *libvirt.DomainEventWatchdog) {
		action := ev.Action
		select {
		case h.events <- lifecycle{watchdog: &action}:
		default: // the guest then ends without its watchdog named: as a crash
		}
	})
	if err != nil {
		_ = conn.DomainEventDeregister(h.cbID)
		_, _ = conn.Close()
		return nil, fmt.Errorf("register watchdog events on %s: %w", uri, err)
	}
	return h, nil
}

// close destroys any guest still running (the embedded driver has no AUTODESTROY; in a Pod qemu would
// die with the container anyway), deregisters events and closes the connection.
func (h *hypervisor) close() {
	if doms, err := h.conn.ListAllDomains(libvirt.CONNECT_LIST_DOMAINS_ACTIVE); err == nil {
		for i := range doms {
			_ = doms[i].Destroy()
			_ = doms[i].Free()
		}
	}
	_ = h.conn.DomainEventDeregister(h.cbID)
	_ = h.conn.DomainEventDeregister(h.watchdogID)
	_, _ = h.conn.Close()
}
