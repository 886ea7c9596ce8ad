// Package qemucaps carries libvirt's cache of qemu's capabilities from where they were probed to
// where a launcher's libvirt looks for them.
//
// libvirt learns qemu's capabilities by running qemu once (about half a second under emulation)
// before it starts the first guest, and caches them under its driver's root. Every launcher starts
// with an empty root, so every VM start would pay for that probe. Instead the node agent's Pod
// probes once per node with the launcher image, as the launcher's user (virt-launcher
// probe-capabilities), the agent reads the files (Read) and sends them with each sync, and the
// launcher installs them (Install) before it starts the guest. libvirt checks a cached file against
// the qemu binary's and its own driver's ctime, the qemu modules directory and whether KVM is
// usable, which are the same for every container of the image on a node; a file that does not
// fit is dropped and qemu probed as before.
//
// The files also decide how libvirt reads a started guest's CPU features (ForDefaultCPU).
package qemucaps

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/podvirt/podvirt/internal/atomicfile"
)

// MaxFile bounds one cache file (about 80 KiB for qemu 7.2).
const MaxFile = 1 << 20

// Dir is where the embedded driver rooted at root caches qemu's capabilities.
func Dir(root string) string { return filepath.Join(root, "cache", "qemu", "capabilities") }

// ValidName: a cache file's name is the SHA-256 (hex) of the emulator's path, then ".xml".
func ValidName(name string) bool {
	hash, ok := strings.CutSuffix(name, ".xml")
	return ok && len(hash) == 64 && strings.Trim(hash, "0123456789abcdef") == ""
}

// unavailableFeaturesFlag is the cache's record that qemu's x86 CPU has an "unavailable-features"
// property (libvirt's QEMU_CAPS_CPU_UNAVAILABLE_FEATURES).
var unavailableFeaturesFlag = regexp.MustCompile(`(?m)^[ \t]*<flag name=["']cpu-unavailable-features["']/>[ \t]*\r?\n`)

// libvirtVersion is the version of the libvirt that wrote a cache file (see libvirtMajor).
var libvirtVersion = regexp.MustCompile(`<selfvers>(\d+)</selfvers>`)

// libvirtMajor is the major version of a <selfvers> value (major × 1,000,000 + minor × 1,000 + micro).
func libvirtMajor(selfvers []byte) int {
	v, err := strconv.Atoi(string(selfvers))
	if err != nil {
		return -1
	}
	return v / 1_000_000
}

// ForDefaultCPU returns the files without the "cpu-unavailable-features" flag, for a launcher whose
// guest runs the emulator's default CPU (domainxml.EmulatorDefaultCPU): libvirt 9 then reads the
// started vCPU's CPUID words in two qom-gets instead of one qom-get per CPU property (398 with qemu
// 7.2, most of a start under emulation; docs/launcher.md, "The guest CPU's readout"). Files written
// by another libvirt than 9.x, whose reading this was not measured with, are returned as they are.
func ForDefaultCPU(files map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(files))
	for name, data := range files {
		if m := libvirtVersion.FindSubmatch(data); m != nil && libvirtMajor(m[1]) == 9 {
			data = unavailableFeaturesFlag.ReplaceAll(data, nil)
		}
		out[name] = data
	}
	return out
}

// Read reads the cache files in dir (name → content); other files are ignored.
func Read(dir string) (map[string][]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("qemu capabilities: %w", err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		if !e.Type().IsRegular() || !ValidName(e.Name()) {
			continue
		}
		if info, err := e.Info(); err != nil || info.Size() > MaxFile {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("qemu capabilities: %w", err)
		}
		if len(data) <= MaxFile {
			files[e.Name()] = data
		}
	}
	return files, nil
}

// Install writes files into dir (created when missing), keeping any file already there; mode is
// the files' mode. A name that is not a cache file's, or an oversized file, is refused naming it.
func Install(dir string, files map[string][]byte, mode os.FileMode) error {
	if len(files) == 0 {
		return nil
	}
	for name, data := range files {
		if !ValidName(name) || len(data) > MaxFile {
			return fmt.Errorf("qemuCapabilities[%q]: not a capabilities cache file", name)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range files {
		path := filepath.Join(dir, name)
		if _, err := os.Lstat(path); err == nil {
			continue
		}
		if err := atomicfile.WriteFile(path, data, mode, atomicfile.Volatile); err != nil { // a cache: probed again if lost
			return err
		}
	}
	return nil
}
