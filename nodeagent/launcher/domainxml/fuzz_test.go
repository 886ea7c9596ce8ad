package domainxml_test

import (
	"encoding/json"
	"path"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"libvirt.org/go/libvirtxml"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/corpus"
	"github.com/podvirt/podvirt/nodeagent/launcher/domainxml"
)

// FuzzBuild builds a domain from any instance spec (seeded with the API corpus): a spec is refused,
// or every file the launcher is to create and every disk source lies under one of the Pod's roots,
// and the domain XML parses back. `make fuzz` runs it for minutes; `go test` runs the seeds.
func FuzzBuild(f *testing.F) {
	corpus.SeedInstanceSpecs(f, "../../../api/v1/testdata/corpus")
	roots := []string{privateDir, launcherv1.PVCMountRoot, launcherv1.HostDiskMountRoot, launcherv1.ConfigDiskMountRoot, launcherv1.PersistentStateDir}
	under := func(p string) bool {
		if p == "" || path.Clean(p) != p {
			return false
		}
		for _, r := range roots {
			if strings.HasPrefix(p, r+"/") {
				return true
			}
		}
		return false
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "vm", UID: "uid-1"}}
		if json.Unmarshal(data, &vmi.Spec) != nil {
			return
		}
		in := domainxml.Inputs{Emulation: true, StateDir: launcherv1.PersistentStateDir, ContainerDisks: map[string]domainxml.Image{},
			Kernel: privateDir + "/kernelboot/kernel", Initrd: privateDir + "/kernelboot/initrd"}
		for _, v := range vmi.Spec.Volumes {
			if v.ContainerDisk != nil { // as the disk container copied it
				in.ContainerDisks[v.Name] = domainxml.Image{Path: path.Join(privateDir, launcherv1.DisksDir, v.Name, "disk.qcow2"), Format: "qcow2"}
			}
		}
		plan, err := domainxml.Build(vmi, in)
		if err != nil {
			return
		}
		for _, file := range plan.Files {
			if !under(file.Path) {
				t.Fatalf("volume %s: file %q outside the Pod's roots", file.Volume, file.Path)
			}
		}
		for _, d := range plan.Domain.Devices.Disks {
			if s := d.Source; s != nil && s.File != nil && !under(s.File.File) {
				t.Fatalf("disk %v: source %q outside the Pod's roots", d.Target, s.File.File)
			}
		}
		out, err := plan.Domain.Marshal()
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		var back libvirtxml.Domain
		if err := back.Unmarshal(out); err != nil {
			t.Fatalf("the domain XML does not parse back: %v\n%s", err, out)
		}
	})
}
