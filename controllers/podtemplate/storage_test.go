package podtemplate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// A tenant cannot fill a node's disk: every disk-backed emptyDir of the launcher Pod has a
// sizeLimit and every container an ephemeral-storage limit; the private directory's bound is
// Fixed + each emptyDisk's capacity + PerContainerDisk per containerDisk, and the Pod's total (the
// kubelet evicts past it) covers the private directory and every container's layer.
func TestRenderPodBoundsNodeStorage(t *testing.T) {
	v := seedInstance(t)
	v.Spec.Volumes = append(v.Spec.Volumes,
		virtv1.Volume{Name: "scratch", VolumeSource: virtv1.VolumeSource{EmptyDisk: &virtv1.EmptyDiskSource{Capacity: resource.MustParse("5Gi")}}},
		virtv1.Volume{Name: "second", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "disk2"}}})
	v.Spec.Domain.Devices.Disks = append(v.Spec.Domain.Devices.Disks, virtv1.Disk{Name: "scratch"}, virtv1.Disk{Name: "second"})
	cfg := testConfig()
	cfg.Storage = Storage{PerContainerDisk: resource.MustParse("3Gi"), Fixed: resource.MustParse("1Gi")}
	pod, err := RenderPod(v, cfg)
	require.NoError(t, err)

	private := resource.MustParse("12Gi") // 1Gi + 5Gi + 2 × 3Gi
	total := resource.Quantity{}
	for _, vol := range pod.Spec.Volumes {
		ed := vol.EmptyDir
		if ed == nil || ed.Medium != corev1.StorageMediumDefault {
			continue
		}
		require.NotNil(t, ed.SizeLimit, "emptyDir %s has no sizeLimit", vol.Name)
		if vol.Name == launcherv1.PrivateVolume {
			assert.Zero(t, private.Cmp(*ed.SizeLimit), "private directory bound %s, want %s", ed.SizeLimit, &private)
		}
	}
	for _, c := range pod.Spec.Containers {
		lim, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]
		require.True(t, ok, "container %s has no ephemeral-storage limit", c.Name)
		_, ok = c.Resources.Requests[corev1.ResourceEphemeralStorage]
		require.True(t, ok, "container %s has no ephemeral-storage request", c.Name)
		total.Add(lim)
	}
	assert.Positive(t, total.Cmp(private), "the Pod's limit (%s) covers the private directory and the layers", &total)

	cfg.Storage = Storage{}
	pod, err = RenderPod(v, cfg)
	require.NoError(t, err)
	def := DefaultStorage().For(v)
	assert.Zero(t, def.Cmp(*pod.Spec.Volumes[0].EmptyDir.SizeLimit), "zero Storage means the default")
}
