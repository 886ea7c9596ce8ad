// Package accel decides whether guests on this node run with hardware virtualization (KVM) or under
// software emulation (qemu's TCG). It does not trust the mere presence of /dev/kvm: on some hosts that
// device is kvm_pvm (pagetable-based virtualization without vmx/svm), with which ordinary guest kernels
// never boot. KVM counts as usable only when the CPU advertises vmx or svm, the kvm_pvm module is not
// loaded, and /dev/kvm opens read-write.
package accel

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Condition reasons for the VMI's SoftwareEmulation condition.
const (
	// ReasonEmulationConfigured: emulation was asked for (--use-emulation).
	ReasonEmulationConfigured = "EmulationConfigured"
	// ReasonKVMUnavailable: the probe found KVM unusable on this node.
	ReasonKVMUnavailable = "KVMUnavailable"
	// ReasonKVMAvailable: the guest runs with KVM.
	ReasonKVMAvailable = "KVMAvailable"
)

// Probe holds the host paths the probe reads. DefaultProbe has the real ones; tests point them at files
// of their own.
type Probe struct {
	// CPUInfo is /proc/cpuinfo.
	CPUInfo string
	// KVMDevice is /dev/kvm.
	KVMDevice string
	// SysModules is /sys/module (a directory per loaded module).
	SysModules string
	// ProcModules is /proc/modules (one loaded module per line); a missing file is not an error.
	ProcModules string
}

// DefaultProbe reads the host's real files.
func DefaultProbe() Probe {
	return Probe{CPUInfo: "/proc/cpuinfo", KVMDevice: "/dev/kvm", SysModules: "/sys/module", ProcModules: "/proc/modules"}
}

// Result is what the probe found.
type Result struct {
	// KVMUsable is true when guests can run with KVM.
	KVMUsable bool
	// Why says why KVM is not usable (empty when it is).
	Why string
}

// Run probes the host.
func (p Probe) Run() Result {
	flags, err := cpuFlags(p.CPUInfo)
	if err != nil {
		return Result{Why: err.Error()}
	}
	if !flags["vmx"] && !flags["svm"] {
		return Result{Why: "the CPU has no hardware virtualization (no vmx or svm flag in " + p.CPUInfo + ")"}
	}
	if pvm, where := p.pvmLoaded(); pvm {
		return Result{Why: "/dev/kvm is kvm_pvm (" + where + "), with which ordinary guests do not boot"}
	}
	f, err := os.OpenFile(p.KVMDevice, os.O_RDWR, 0)
	if err != nil {
		return Result{Why: fmt.Sprintf("open %s: %v", p.KVMDevice, err)}
	}
	_ = f.Close()
	return Result{KVMUsable: true}
}

// cpuFlags collects every flag named on a "flags" line of cpuinfo.
func cpuFlags(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read cpu flags: %w", err)
	}
	defer func() { _ = f.Close() }()
	flags := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(key) != "flags" {
			continue
		}
		for _, flag := range strings.Fields(value) {
			flags[flag] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read cpu flags: %w", err)
	}
	return flags, nil
}

// pvmLoaded reports whether the kvm_pvm module is loaded, and where that was seen.
func (p Probe) pvmLoaded() (bool, string) {
	sys := filepath.Join(p.SysModules, "kvm_pvm")
	if _, err := os.Stat(sys); err == nil {
		return true, sys + " exists"
	}
	raw, err := os.ReadFile(p.ProcModules)
	if err != nil {
		return false, ""
	}
	for line := range strings.Lines(string(raw)) {
		if name, _, _ := strings.Cut(line, " "); strings.TrimSpace(name) == "kvm_pvm" {
			return true, "listed in " + p.ProcModules
		}
	}
	return false, ""
}

// Decision is how guests on this node run.
type Decision struct {
	// Emulate is true when guests run under software emulation.
	Emulate bool
	// Reason is the SoftwareEmulation condition's reason: ReasonEmulationConfigured,
	// ReasonKVMUnavailable or ReasonKVMAvailable.
	Reason string
	// Message explains the decision to a user.
	Message string
}

// Decide chooses between KVM and emulation: emulation when it is configured (useEmulation, KubeVirt's
// developerConfiguration.useEmulation) or when the probe found KVM unusable.
func Decide(useEmulation bool, probe Result) Decision {
	const slow = "the guest runs under software emulation (TCG), which is much slower than hardware virtualization"
	switch {
	case useEmulation:
		return Decision{Emulate: true, Reason: ReasonEmulationConfigured, Message: slow + ": emulation is configured on this node (--use-emulation)"}
	case !probe.KVMUsable:
		return Decision{Emulate: true, Reason: ReasonKVMUnavailable, Message: slow + ": KVM is not usable on this node: " + probe.Why}
	default:
		return Decision{Reason: ReasonKVMAvailable, Message: "the guest runs with hardware virtualization (KVM)"}
	}
}
