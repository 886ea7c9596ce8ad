//go:build launcher

package launcher_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/nodeagent/launcher/qemucaps"
)

// unavailableFeatures is the flag a cache file loses for a guest with the emulator's default CPU.
const unavailableFeatures = "<flag name='cpu-unavailable-features'/>"

// freshRoot is a libvirt root of its own for the pod user (the other tests share one).
func freshRoot(t *testing.T, name string) string {
	t.Helper()
	root, err := os.MkdirTemp(shared.dir, name+"-root-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chown(root, podUID, podUID); err != nil {
		t.Fatal(err)
	}
	return root
}

// marked is the cache files with an XML comment appended to each: a file libvirt probes again and
// rewrites loses it.
func marked(files map[string][]byte, mark string) map[string][]byte {
	out := map[string][]byte{}
	for name, data := range files {
		out[name] = append(bytes.Clone(data), []byte("<!-- "+mark+" -->\n")...)
	}
	return out
}

// syncWith syncs v with the cache files and returns the file libvirt has afterwards.
func syncWith(t *testing.T, p *pod, v *virtv1.VirtualMachineInstance, root string, files map[string][]byte, name string) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	st := p.must(http.StatusOK, http.MethodPost, launcherv1.PathSync, launcherv1.SyncRequest{VMI: data, Emulation: true, QemuCapabilities: files})
	if st.State != launcherv1.DomainRunning {
		t.Fatalf("status after sync = %+v", st)
	}
	t.Logf("%s: sync → Running %s", p.name, time.Since(t0).Round(time.Millisecond))
	got, err := os.ReadFile(filepath.Join(qemucaps.Dir(root), name))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// The node agent Pod's probe (virt-launcher probe-capabilities, as the launcher's user) leaves
// libvirt's cache files; a launcher given them with the sync starts its guest without probing qemu
// (libvirt keeps the file it was given) — for a guest with the emulator's default CPU without the
// cpu-unavailable-features flag (libvirt reads the started vCPU the short way), for a guest with a
// CPU model as probed — while a file that does not fit this qemu (another ctime) is dropped and
// qemu probed again, as without one.
func TestQemuCapabilitiesFromTheNodeAgent(t *testing.T) {
	out, probeRoot := freshRoot(t, "caps"), freshRoot(t, "probe")
	script := fmt.Sprintf("mount --bind %s /etc/passwd && mount --bind %s /etc/group && exec setpriv --reuid %d --regid %d --clear-groups %s probe-capabilities --out %s --libvirt-root %s",
		shared.passwd, shared.group, podUID, podUID, shared.bin, out, probeRoot)
	probe, err := exec.Command("unshare", "--mount", "sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("probe-capabilities: %v\n%s", err, probe)
	}
	files, err := qemucaps.Read(out)
	if err != nil || len(files) == 0 {
		t.Fatalf("no cache files in %s (%v); probe said:\n%s", out, err, probe)
	}
	name := "926803a9278e445ec919c2b6cbd8c1c449c75b26dcb1686b774314180376c725.xml" // /usr/bin/qemu-system-x86_64
	if _, ok := files[name]; !ok {
		t.Fatalf("no cache file for /usr/bin/qemu-system-x86_64 among %d", len(files))
	}

	root := freshRoot(t, "given")
	p := startPod(t, "capsgiven", "--libvirt-root", root)
	if !bytes.Contains(files[name], []byte(unavailableFeatures)) {
		t.Fatalf("the probe's cache file has no %s", unavailableFeatures)
	}
	got := syncWith(t, p, vmi(p.name, 0), root, marked(files, "given"), name)
	if !bytes.Contains(got, []byte("<!-- given -->")) {
		t.Errorf("libvirt probed qemu again instead of using the cache file it was given")
	}
	if bytes.Contains(got, []byte(unavailableFeatures)) {
		t.Errorf("a guest with the default CPU: the cache file still has %s", unavailableFeatures)
	}
	if log, _ := os.ReadFile(p.stderr.Name()); bytes.Contains(log, []byte("Probed qemu's capabilities")) {
		t.Errorf("the launcher probed qemu ahead although the sync came first:\n%s", log)
	}

	root = freshRoot(t, "model")
	p = startPod(t, "capsmodel", "--libvirt-root", root)
	withModel := vmi(p.name, 0)
	withModel.Spec.Domain.CPU = &virtv1.CPU{Model: "qemu64"}
	got = syncWith(t, p, withModel, root, marked(files, "model"), name)
	if !bytes.Contains(got, []byte("<!-- model -->")) || !bytes.Contains(got, []byte(unavailableFeatures)) {
		t.Errorf("a guest with a CPU model: want the cache file as probed, got one with the mark %v and the flag %v",
			bytes.Contains(got, []byte("<!-- model -->")), bytes.Contains(got, []byte(unavailableFeatures)))
	}

	stale := map[string][]byte{}
	for n, data := range files {
		stale[n] = regexp.MustCompile(`<qemuctime>\d+</qemuctime>`).ReplaceAll(data, []byte("<qemuctime>1</qemuctime>"))
	}
	root = freshRoot(t, "stale")
	p = startPod(t, "capsstale", "--libvirt-root", root)
	if got := syncWith(t, p, vmi(p.name, 0), root, marked(stale, "stale"), name); bytes.Contains(got, []byte("<!-- stale -->")) {
		t.Errorf("libvirt kept a cache file of another qemu binary (ctime 1)")
	}
}
