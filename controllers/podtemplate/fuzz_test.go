package podtemplate

import (
	"encoding/json"
	"path"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/corpus"
)

// mountRoots are the directories a launcher Pod mounts volumes at: a mount is a root itself or one
// path element below one.
var mountRoots = []string{launcherv1.PrivateDir, launcherv1.BinDir, launcherv1.PVCMountRoot, launcherv1.ConfigDiskMountRoot,
	launcherv1.HostDiskMountRoot, launcherv1.SecretMountRoot, launcherv1.HugepagesDir, launcherv1.PersistentStateDir}

// FuzzRenderPod renders any instance spec (seeded with the API corpus): a spec is refused or its
// Pod mounts every volume at a root or one element below it, mounts host directories only under
// the namespace's host disk directory, bounds every disk-backed emptyDir, and copies container
// disks only into the private directory. `make fuzz` runs it for minutes; `go test` runs the seeds.
func FuzzRenderPod(f *testing.F) {
	corpus.SeedInstanceSpecs(f, "../../api/v1/testdata/corpus")
	f.Fuzz(func(t *testing.T, data []byte) {
		vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "vm", UID: "uid-1"}}
		if json.Unmarshal(data, &vmi.Spec) != nil {
			return
		}
		pod, err := RenderPod(vmi, testConfig())
		if err != nil {
			return
		}
		checkPodStaysInItsRoots(t, pod)
	})
}

func checkPodStaysInItsRoots(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	for _, c := range pod.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if !underARoot(m.MountPath) {
				t.Fatalf("container %s mounts %s at %q, outside every root", c.Name, m.Name, m.MountPath)
			}
		}
		if strings.HasSuffix(c.Name, "-containerdisk") || c.Name == "kernel-boot" {
			pairs := c.Command[3:] // the helper, "serve", the private directory, then SRC DST pairs
			if len(pairs)%2 != 0 {
				t.Fatalf("container %s: odd copy arguments %q", c.Name, pairs)
			}
			for i := 0; i < len(pairs); i += 2 {
				if dst := pairs[i+1]; !strings.HasPrefix(dst, launcherv1.PrivateDir+"/") || path.Clean(dst) != dst {
					t.Fatalf("container %s copies to %q, outside the private directory", c.Name, dst)
				}
			}
		}
	}
	for _, v := range pod.Spec.Volumes {
		if hp := v.HostPath; hp != nil && !strings.HasPrefix(path.Clean(hp.Path)+"/", launcherv1.HostDiskDir(pod.Namespace)) {
			t.Fatalf("volume %s mounts host path %q, outside %s", v.Name, hp.Path, launcherv1.HostDiskDir(pod.Namespace))
		}
		if ed := v.EmptyDir; ed != nil && ed.Medium == corev1.StorageMediumDefault && ed.SizeLimit == nil {
			t.Fatalf("emptyDir %s has no sizeLimit", v.Name)
		}
	}
}

func underARoot(p string) bool {
	if path.Clean(p) != p {
		return false
	}
	for _, root := range mountRoots {
		rest, ok := strings.CutPrefix(p, root)
		if ok && (rest == "" || (strings.HasPrefix(rest, "/") && !strings.Contains(rest[1:], "/") && rest != "/.." && rest != "/.")) {
			return true
		}
	}
	return false
}
