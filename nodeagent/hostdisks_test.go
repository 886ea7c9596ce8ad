package nodeagent

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

func hostDiskVMI(disks ...virtv1.HostDisk) *virtv1.VirtualMachineInstance {
	vmi := &virtv1.VirtualMachineInstance{}
	vmi.Namespace = "vm1"
	for i := range disks {
		vmi.Spec.Volumes = append(vmi.Spec.Volumes, virtv1.Volume{Name: "d", VolumeSource: virtv1.VolumeSource{HostDisk: &disks[i]}})
	}
	return vmi
}

func TestPrepareHostDisks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("prepareHostDisks hands files to the launcher's user: run as root, as the node agent does (make test does)")
	}
	dir := t.TempDir()
	created := virtv1.HostDisk{Path: launcherv1.HostDiskRoot + "/vm1/data.img", Type: virtv1.HostDiskExistsOrCreate, Capacity: resource.MustParse("16Mi")}
	require.NoError(t, prepareHostDisks(dir, hostDiskVMI(created), nil, HostDiskBudget{}))
	fi, err := os.Stat(filepath.Join(dir, "vm1", "data.img"))
	require.NoError(t, err)
	assert.Equal(t, int64(16<<20), fi.Size())
	assert.Zero(t, fi.Sys().(*syscall.Stat_t).Blocks, "sparse")
	assert.EqualValues(t, launcherv1.LauncherUID, fi.Sys().(*syscall.Stat_t).Uid)

	// An existing image is kept as it is (its data survives the instance).
	require.NoError(t, os.WriteFile(filepath.Join(dir, "vm1", "data.img"), []byte("kept"), 0o600))
	require.NoError(t, prepareHostDisks(dir, hostDiskVMI(created, virtv1.HostDisk{Path: launcherv1.HostDiskRoot + "/vm1/data.img", Type: virtv1.HostDiskExists}), nil, HostDiskBudget{}))
	data, err := os.ReadFile(filepath.Join(dir, "vm1", "data.img"))
	require.NoError(t, err)
	assert.Equal(t, "kept", string(data))

	// The image goes to the user the launcher Pod runs as (the controller's --launcher-uid).
	pod := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(2000)), RunAsGroup: ptr.To(int64(3000))}}}
	require.NoError(t, prepareHostDisks(dir, hostDiskVMI(created), pod, HostDiskBudget{}))
	fi, err = os.Stat(filepath.Join(dir, "vm1", "data.img"))
	require.NoError(t, err)
	assert.EqualValues(t, 2000, fi.Sys().(*syscall.Stat_t).Uid)
	assert.EqualValues(t, 3000, fi.Sys().(*syscall.Stat_t).Gid)

	err = prepareHostDisks(dir, hostDiskVMI(virtv1.HostDisk{Path: launcherv1.HostDiskRoot + "/vm1/missing.img", Type: virtv1.HostDiskExists}), nil, HostDiskBudget{})
	var herr *hostDiskError
	require.ErrorAs(t, err, &herr)
	assert.Equal(t, "spec.volumes[0].hostDisk.path: /var/lib/podvirt/hostdisks/vm1/missing.img does not exist on the node (type Disk; DiskOrCreate creates it)", err.Error())
	assert.True(t, permanentSyncError(err), "the instance fails")

	for _, p := range []string{"/etc/shadow", launcherv1.HostDiskRoot + "/other-namespace/data.img"} {
		err = prepareHostDisks(dir, hostDiskVMI(virtv1.HostDisk{Path: p, Type: virtv1.HostDiskExists}), nil, HostDiskBudget{})
		require.ErrorAs(t, err, &herr, "never outside the namespace's host disk directory, whatever admission let through: %s", p)
	}

	// A path that climbs out of the namespace's directory creates nothing elsewhere.
	escape := virtv1.HostDisk{Path: launcherv1.HostDiskRoot + "/vm1/../other-namespace/data.img", Type: virtv1.HostDiskExistsOrCreate, Capacity: resource.MustParse("1Mi")}
	require.ErrorAs(t, prepareHostDisks(dir, hostDiskVMI(escape), nil, HostDiskBudget{}), &herr)
	assert.NoFileExists(t, filepath.Join(dir, "other-namespace", "data.img"))

	// Symlinks are never followed: not as the image, not as a directory on the way.
	outside := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(outside, []byte("x"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "vm1", "link.img")))
	require.NoError(t, os.Symlink(filepath.Dir(outside), filepath.Join(dir, "vm1", "linkdir")))
	for _, p := range []string{"/vm1/link.img", "/vm1/linkdir/victim"} {
		err = prepareHostDisks(dir, hostDiskVMI(virtv1.HostDisk{Path: launcherv1.HostDiskRoot + p, Type: virtv1.HostDiskExists}), nil, HostDiskBudget{})
		require.ErrorAs(t, err, &herr, p)
	}
	fi, err = os.Stat(outside)
	require.NoError(t, err)
	assert.Zero(t, fi.Sys().(*syscall.Stat_t).Uid, "the file outside kept its owner")
	err = prepareHostDisks(dir, hostDiskVMI(virtv1.HostDisk{Path: launcherv1.HostDiskRoot + "/vm1", Type: virtv1.HostDiskExists}), nil, HostDiskBudget{})
	require.ErrorAs(t, err, &herr, "a directory is not an image")
}

// namespaces is a reader of the given namespaces (name → UID).
func namespaces(uids map[string]string) client.Reader {
	b := fake.NewClientBuilder()
	for name, uid := range uids {
		b = b.WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)}})
	}
	return b.Build()
}

// A namespace's hostDisk images go with it: a sweep removes the directory of a namespace that is
// gone, and the images (not the directories, which a launcher Pod may have mounted) of one that was
// deleted and created again; a namespace that lives keeps its images, and what is not a namespace's
// directory is left alone.
func TestSweepRemovesTheImagesOfDeletedNamespaces(t *testing.T) {
	dir := t.TempDir()
	write := func(p, data string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte(data), 0o644))
	}
	write("live/disk.img", "kept")
	write("live/"+launcherv1.HostDiskNamespaceUIDFile, "uid-live")
	write("gone/disk.img", "removed")
	write("gone/"+launcherv1.HostDiskNamespaceUIDFile, "uid-gone")
	write("again/sub/disk.img", "the old namespace's")
	write("again/"+launcherv1.HostDiskNamespaceUIDFile, "uid-old")
	write("legacy/disk.img", "adopted")
	write("Not_A_Namespace/disk.img", "not ours")
	h := &HostDisks{Dir: dir, Reader: namespaces(map[string]string{"live": "uid-live", "again": "uid-new", "legacy": "uid-legacy"})}
	h.Sweep(context.Background())

	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	assert.Equal(t, "kept", read("live/disk.img"))
	assert.NoDirExists(t, filepath.Join(dir, "gone"), "a deleted namespace's images are removed")
	assert.NoFileExists(t, filepath.Join(dir, "again/sub/disk.img"), "a namespace of the same name does not inherit the images")
	assert.DirExists(t, filepath.Join(dir, "again/sub"), "directories stay: a launcher Pod may have one mounted")
	assert.Equal(t, "uid-new", read("again/"+launcherv1.HostDiskNamespaceUIDFile))
	assert.Equal(t, "adopted", read("legacy/disk.img"), "a directory from before the records is adopted")
	assert.Equal(t, "uid-legacy", read("legacy/"+launcherv1.HostDiskNamespaceUIDFile))
	assert.Equal(t, "not ours", read("Not_A_Namespace/disk.img"))
}

// A VM in a namespace created again after its deletion, before any sweep, starts with a fresh image
// of the capacity it asks for, not the data of the namespace before it.
func TestPrepareDoesNotInheritADeletedNamespacesImages(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("Prepare hands files to the launcher's user: run as root, as the node agent does (make test does)")
	}
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "vm1"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "vm1", launcherv1.HostDiskNamespaceUIDFile), []byte("uid-old"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "vm1", "disk.img"), []byte("secret of the old tenant"), 0o644))
	h := &HostDisks{Dir: dir, Reader: namespaces(map[string]string{"vm1": "uid-new"})}
	hd := virtv1.HostDisk{Path: launcherv1.HostDiskRoot + "/vm1/disk.img", Type: virtv1.HostDiskExistsOrCreate, Capacity: resource.MustParse("1Mi")}
	require.NoError(t, h.Prepare(context.Background(), hostDiskVMI(hd), nil))
	data, err := os.ReadFile(filepath.Join(dir, "vm1", "disk.img"))
	require.NoError(t, err)
	assert.Len(t, data, 1<<20, "a fresh image of the capacity asked for")
	assert.NotContains(t, string(data), "secret")

	record := virtv1.HostDisk{Path: launcherv1.HostDiskRoot + "/vm1/" + launcherv1.HostDiskNamespaceUIDFile, Type: virtv1.HostDiskExistsOrCreate, Capacity: resource.MustParse("1Mi")}
	assert.ErrorContains(t, h.Prepare(context.Background(), hostDiskVMI(record), nil), "the node agent's", "the UID record is never a guest's disk (its launcher could rewrite it)")

	gone := &HostDisks{Dir: dir, Reader: namespaces(nil)}
	assert.ErrorContains(t, gone.Prepare(context.Background(), hostDiskVMI(hd), nil), "namespace vm1", "no namespace, no images")
}

// A namespace's images on one node stay within the agent's budget, in bytes and in images; a
// refused image is not left behind, and an image that exists is never counted twice.
func TestHostDiskBudget(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("prepareHostDisks hands files to the launcher's user: run as root, as the node agent does (make test does)")
	}
	dir := t.TempDir()
	budget := HostDiskBudget{Bytes: 10 << 20, Images: 2}
	image := func(name, capacity string) virtv1.HostDisk {
		return virtv1.HostDisk{Path: launcherv1.HostDiskRoot + "/vm1/" + name, Type: virtv1.HostDiskExistsOrCreate, Capacity: resource.MustParse(capacity)}
	}
	require.NoError(t, prepareHostDisks(dir, hostDiskVMI(image("a.img", "6Mi")), nil, budget))
	require.NoError(t, prepareHostDisks(dir, hostDiskVMI(image("a.img", "6Mi")), nil, budget), "an existing image is not created again")

	err := prepareHostDisks(dir, hostDiskVMI(image("b.img", "5Mi")), nil, budget)
	var herr *hostDiskError
	require.ErrorAs(t, err, &herr)
	assert.Equal(t, "spec.volumes[0].hostDisk.capacity: 5Mi more would bring namespace vm1's hostDisk images on this node to 11Mi, beyond the node agent's budget of 10Mi per namespace (--host-disk-namespace-budget)", err.Error())
	assert.NoFileExists(t, filepath.Join(dir, "vm1", "b.img"))

	require.NoError(t, prepareHostDisks(dir, hostDiskVMI(image("b.img", "4Mi")), nil, budget))
	err = prepareHostDisks(dir, hostDiskVMI(image("c.img", "1Ki")), nil, budget)
	require.ErrorAs(t, err, &herr)
	assert.Contains(t, err.Error(), "spec.volumes[0].hostDisk.path: namespace vm1 already has 2 hostDisk images and directories on this node, the node agent's limit (--host-disk-namespace-images)")
	assert.NoFileExists(t, filepath.Join(dir, "vm1", "c.img"))

	// An instance refused for its second image leaves not its first one behind either.
	budget.Images = 10
	err = prepareHostDisks(dir, hostDiskVMI(image("d.img", "0Mi"), image("e.img", "1Mi")), nil, budget)
	require.ErrorAs(t, err, &herr)
	assert.Contains(t, err.Error(), "spec.volumes[1].hostDisk.capacity")
	assert.NoFileExists(t, filepath.Join(dir, "vm1", "d.img"))

	// Another namespace has a budget of its own.
	other := hostDiskVMI(virtv1.HostDisk{Path: launcherv1.HostDiskRoot + "/vm2/a.img", Type: virtv1.HostDiskExistsOrCreate, Capacity: resource.MustParse("10Mi")})
	other.Namespace = "vm2"
	require.NoError(t, prepareHostDisks(dir, other, nil, budget))
}
