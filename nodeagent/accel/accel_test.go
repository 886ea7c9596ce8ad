package accel_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podvirt/podvirt/nodeagent/accel"
)

type host struct {
	flags   string // the cpuinfo flags line's value
	kvm     bool   // /dev/kvm exists (a plain file that opens)
	sysPVM  bool   // /sys/module/kvm_pvm exists
	procPVM bool   // /proc/modules lists kvm_pvm
}

func (h host) probe(t *testing.T) accel.Probe {
	dir := t.TempDir()
	p := accel.Probe{
		CPUInfo:     filepath.Join(dir, "cpuinfo"),
		KVMDevice:   filepath.Join(dir, "kvm"),
		SysModules:  filepath.Join(dir, "module"),
		ProcModules: filepath.Join(dir, "modules"),
	}
	cpuinfo := "processor\t: 0\nflags\t\t: " + h.flags + "\n\nprocessor\t: 1\nflags\t\t: " + h.flags + "\n"
	require.NoError(t, os.WriteFile(p.CPUInfo, []byte(cpuinfo), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(p.SysModules, "kvm"), 0o755))
	if h.kvm {
		require.NoError(t, os.WriteFile(p.KVMDevice, nil, 0o600))
	}
	if h.sysPVM {
		require.NoError(t, os.MkdirAll(filepath.Join(p.SysModules, "kvm_pvm"), 0o755))
	}
	modules := "kvm 1 0 - Live 0x0\n"
	if h.procPVM {
		modules += "kvm_pvm 1 0 - Live 0x0\n"
	}
	require.NoError(t, os.WriteFile(p.ProcModules, []byte(modules), 0o644))
	return p
}

func TestProbe(t *testing.T) {
	cases := []struct {
		name   string
		host   host
		usable bool
		why    string
	}{
		{"intel with kvm", host{flags: "fpu vme vmx sse", kvm: true}, true, ""},
		{"amd with kvm", host{flags: "fpu svm sse", kvm: true}, true, ""},
		{"no vmx or svm although /dev/kvm opens", host{flags: "fpu vme sse", kvm: true}, false, "no vmx or svm"},
		{"kvm_pvm in /sys/module", host{flags: "vmx", kvm: true, sysPVM: true}, false, "kvm_pvm"},
		{"kvm_pvm in /proc/modules", host{flags: "vmx", kvm: true, procPVM: true}, false, "kvm_pvm"},
		{"no /dev/kvm", host{flags: "vmx"}, false, "open "},
		{"flag names are whole words", host{flags: "vmxx svmm", kvm: true}, false, "no vmx or svm"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.host.probe(t).Run()
			assert.Equal(t, tc.usable, got.KVMUsable)
			if tc.usable {
				assert.Empty(t, got.Why)
			} else {
				assert.Contains(t, got.Why, tc.why)
			}
		})
	}
}

func TestProbeMissingCPUInfo(t *testing.T) {
	p := accel.DefaultProbe()
	p.CPUInfo = filepath.Join(t.TempDir(), "absent")
	got := p.Run()
	assert.False(t, got.KVMUsable)
	assert.Contains(t, got.Why, "read cpu flags")
}

// TestProbeThisHost checks the real probe against the real host: without vmx/svm it must never call
// KVM usable, whatever /dev/kvm does (on the project's machines /dev/kvm is kvm_pvm).
func TestProbeThisHost(t *testing.T) {
	raw, err := os.ReadFile("/proc/cpuinfo")
	require.NoError(t, err)
	hw := false
	for _, f := range strings.Fields(string(raw)) {
		hw = hw || f == "vmx" || f == "svm"
	}
	got := accel.DefaultProbe().Run()
	t.Logf("this host: KVM usable=%v (%s)", got.KVMUsable, got.Why)
	if !hw {
		assert.False(t, got.KVMUsable, "no vmx/svm on this host")
	}
	if _, err := os.Stat("/sys/module/kvm_pvm"); err == nil {
		assert.False(t, got.KVMUsable, "kvm_pvm is loaded on this host")
	}
}

func TestDecide(t *testing.T) {
	usable := accel.Result{KVMUsable: true}
	unusable := accel.Result{Why: "no vmx"}
	cases := []struct {
		name         string
		useEmulation bool
		probe        accel.Result
		emulate      bool
		reason       string
		msg          string
	}{
		{"kvm", false, usable, false, accel.ReasonKVMAvailable, "KVM"},
		{"configured wins over usable kvm", true, usable, true, accel.ReasonEmulationConfigured, "--use-emulation"},
		{"configured and kvm unusable", true, unusable, true, accel.ReasonEmulationConfigured, "software emulation"},
		{"falls back when kvm unusable", false, unusable, true, accel.ReasonKVMUnavailable, "no vmx"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := accel.Decide(tc.useEmulation, tc.probe)
			assert.Equal(t, tc.emulate, d.Emulate)
			assert.Equal(t, tc.reason, d.Reason)
			assert.Contains(t, d.Message, tc.msg)
			if d.Emulate {
				assert.Contains(t, d.Message, "slower", "a user must be told emulation is slow")
			}
		})
	}
}
