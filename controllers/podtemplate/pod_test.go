package podtemplate

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func testConfig() Config {
	return Config{LauncherImage: "docker.io/podvirt/virt-launcher:dev", LauncherPullPolicy: corev1.PullIfNotPresent, UseEmulation: true, Overhead: DefaultOverhead(), LauncherUID: launcherv1.LauncherUID}
}

// seedInstance is the instance the seed's vm-cirros VirtualMachine creates.
func seedInstance(t *testing.T) *virtv1.VirtualMachineInstance {
	raw, err := os.ReadFile(testenv.RepoPath("examples", "vm-cirros.yaml"))
	require.NoError(t, err)
	var vm virtv1.VirtualMachine
	require.NoError(t, yaml.UnmarshalStrict(raw, &vm))
	return &virtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: vm.Name, Namespace: "default", UID: "7e3c1b2a-0000-4000-8000-000000000001", Labels: vm.Spec.Template.ObjectMeta.Labels},
		Spec:       vm.Spec.Template.Spec,
	}
}

func golden(t *testing.T, name string, pod *corev1.Pod) {
	t.Helper()
	got, err := yaml.Marshal(pod)
	require.NoError(t, err)
	path := filepath.Join("testdata", name+".yaml")
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./controllers/vmi -update to create the golden file")
	assert.Equal(t, string(want), string(got), "launcher Pod differs from %s (run with -update if the change is intended)", path)
}

func TestRenderPodGolden(t *testing.T) {
	seed := seedInstance(t)

	kernelBoot := seedInstance(t)
	kernelBoot.Name = "kernel-boot"
	kernelBoot.Spec.Volumes = kernelBoot.Spec.Volumes[1:]
	kernelBoot.Spec.Domain.Devices.Disks = kernelBoot.Spec.Domain.Devices.Disks[1:]
	kernelBoot.Spec.Domain.Firmware = &virtv1.Firmware{KernelBoot: &virtv1.KernelBoot{
		KernelArgs: "console=ttyS0",
		Container:  &virtv1.KernelBootContainer{Image: "docker.io/podvirt/demo-kernelboot:dev", KernelPath: "/boot/vmlinux", InitrdPath: "/boot/initramfs.gz", ImagePullPolicy: corev1.PullNever},
	}}

	pvc := seedInstance(t)
	pvc.Name = "with-pvc"
	pvc.Spec.Volumes = append(pvc.Spec.Volumes, virtv1.Volume{Name: "data", VolumeSource: virtv1.VolumeSource{PersistentVolumeClaim: &virtv1.PersistentVolumeClaimVolumeSource{ClaimName: "data-claim"}}})
	pvc.Spec.Domain.CPU = &virtv1.CPU{Sockets: 1, Cores: 2}
	pvc.Spec.Domain.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128M")}
	pvc.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "node-a"}
	pvc.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "vms", Effect: corev1.TaintEffectNoSchedule}}
	pvc.Spec.TerminationGracePeriodSeconds = ptr.To(int64(60))
	pvc.Spec.Volumes[1].CloudInitNoCloud = &virtv1.CloudInitNoCloudSource{SecretRef: &corev1.LocalObjectReference{Name: "userdata"}}

	// Devices the scheduler must find (a GPU, twice the same host device), spread over zones, and
	// no guest-console-log container.
	devices := seedInstance(t)
	devices.Name = "devices-spread"
	devices.Spec.Domain.Devices.GPUs = []virtv1.GPU{{Name: "gpu1", DeviceName: "nvidia.com/GA102GL_A10"}}
	devices.Spec.Domain.Devices.HostDevices = []virtv1.HostDevice{{Name: "nic1", DeviceName: "intel.com/qat"}, {Name: "nic2", DeviceName: "intel.com/qat"}}
	devices.Spec.Domain.Devices.LogSerialConsole = ptr.To(false)
	devices.Spec.Volumes = append(devices.Spec.Volumes, virtv1.Volume{Name: "scratch", VolumeSource: virtv1.VolumeSource{
		HostDisk: &virtv1.HostDisk{Path: "/var/lib/podvirt/hostdisks/default/vm-cirros/scratch.img", Type: virtv1.HostDiskExistsOrCreate, Capacity: resource.MustParse("1Gi")}}})
	devices.Spec.Domain.Devices.Disks = append(devices.Spec.Domain.Devices.Disks, virtv1.Disk{Name: "scratch"}, virtv1.Disk{Name: "app-config"}, virtv1.Disk{Name: "token"})
	devices.Spec.Volumes = append(devices.Spec.Volumes,
		virtv1.Volume{Name: "app-config", VolumeSource: virtv1.VolumeSource{ConfigMap: &virtv1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}},
		virtv1.Volume{Name: "token", VolumeSource: virtv1.VolumeSource{ServiceAccount: &virtv1.ServiceAccountVolumeSource{ServiceAccountName: "builder"}}})
	devices.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubevirt.io/vm": "vm-cirros"}},
	}}

	// Guest memory in huge pages, a TPM whose state persists, readiness and liveness probes.
	hugeTPM := seedInstance(t)
	hugeTPM.Name = "hugepages-tpm"
	hugeTPM.Spec.Domain.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("128Mi")
	hugeTPM.Spec.Domain.Memory = &virtv1.Memory{Hugepages: &virtv1.Hugepages{PageSize: "2Mi"}}
	hugeTPM.Spec.Domain.Devices.TPM = &virtv1.TPMDevice{Persistent: ptr.To(true)}
	hugeTPM.Spec.ReadinessProbe = &virtv1.Probe{ProbeHandler: virtv1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
		InitialDelaySeconds: 10, PeriodSeconds: 5, FailureThreshold: 3}
	hugeTPM.Spec.LivenessProbe = &virtv1.Probe{ProbeHandler: virtv1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/alive", Port: intstr.FromInt32(8081)}},
		InitialDelaySeconds: 60, PeriodSeconds: 10}

	for name, v := range map[string]*virtv1.VirtualMachineInstance{"seed-vm-cirros": seed, "kernel-boot": kernelBoot, "pvc-cpu-limits": pvc, "devices-spread": devices, "hugepages-tpm": hugeTPM} {
		t.Run(name, func(t *testing.T) {
			pod, err := RenderPod(v, testConfig())
			require.NoError(t, err)
			golden(t, name, pod)
		})
	}
}

func TestRenderPodResources(t *testing.T) {
	v := seedInstance(t)
	pod, err := RenderPod(v, testConfig())
	require.NoError(t, err)
	compute := pod.Spec.Containers[0]
	want := resource.MustParse("64M")
	want.Add(DefaultOverhead().For(v, true))
	assert.Zero(t, want.Cmp(compute.Resources.Requests[corev1.ResourceMemory]), "requests = guest memory + overhead")
	assert.NotContains(t, compute.Resources.Requests, corev1.ResourceName("devices.kubevirt.io/kvm"), "no /dev/kvm under emulation")

	kvm := testConfig()
	kvm.UseEmulation = false
	pod, err = RenderPod(v, kvm)
	require.NoError(t, err)
	assert.Contains(t, pod.Spec.Containers[0].Resources.Requests, corev1.ResourceName("devices.kubevirt.io/kvm"))
	assert.False(t, *pod.Spec.Containers[0].SecurityContext.Privileged)
	assert.True(t, *pod.Spec.SecurityContext.RunAsNonRoot)
}

// requests.memory below memory.guest overcommits: the Pod requests it (plus the overhead), the
// guest still sees memory.guest. Pull secrets of the images reach the Pod, once each.
func TestRenderPodOvercommitAndPullSecrets(t *testing.T) {
	v := seedInstance(t)
	guest := resource.MustParse("256Mi")
	v.Spec.Domain.Memory = &virtv1.Memory{Guest: &guest}
	v.Spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("192Mi")}
	v.Spec.Volumes[0].ContainerDisk.ImagePullSecret = "regcred"
	v.Spec.Domain.Firmware = &virtv1.Firmware{KernelBoot: &virtv1.KernelBoot{Container: &virtv1.KernelBootContainer{Image: "k", KernelPath: "/k", ImagePullSecret: "regcred"}}}
	pod, err := RenderPod(v, testConfig())
	require.NoError(t, err)
	want := resource.MustParse("192Mi")
	want.Add(DefaultOverhead().For(v, true))
	assert.Zero(t, want.Cmp(pod.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]), "requests = requests.memory + overhead, got %s", pod.Spec.Containers[0].Resources.Requests.Memory())
	assert.Equal(t, []corev1.LocalObjectReference{{Name: "regcred"}}, pod.Spec.ImagePullSecrets)
}

func TestRenderPodRejectsWhatCannotRun(t *testing.T) {
	v := seedInstance(t)
	v.Spec.Domain.Resources.Requests = nil
	_, err := RenderPod(v, testConfig())
	assert.ErrorContains(t, err, "spec.domain.resources.requests.memory")

	v = seedInstance(t)
	v.Spec.Domain.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32M")}
	_, err = RenderPod(v, testConfig())
	assert.ErrorContains(t, err, "spec.domain.resources.limits.memory")

	// A name that would leave its mount root is refused even if admission let it through.
	for _, name := range []string{"../../../../usr/bin", "../launcher-exit.json", ".."} {
		v = seedInstance(t)
		v.Spec.Volumes[0].Name = name
		v.Spec.Domain.Devices.Disks[0].Name = name
		_, err = RenderPod(v, testConfig())
		assert.ErrorContains(t, err, "spec.volumes[0].name", name)
	}
}

func TestPodNameIsDeterministicAndShort(t *testing.T) {
	v := seedInstance(t)
	assert.Equal(t, PodName(v), PodName(v.DeepCopy()))
	other := v.DeepCopy()
	other.UID = "another"
	assert.NotEqual(t, PodName(v), PodName(other))
	long := v.DeepCopy()
	long.Name = "a-very-long-virtual-machine-instance-name-that-goes-on-and-on-and-on"
	assert.LessOrEqual(t, len(PodName(long)), 63)
}

// Disk containers copy containerDisk and kernelBoot files with the helper the compute container,
// started first, installs in its postStart hook. No init container: its exit would cost a relist.
// An instance with neither has no hook at all.
func TestRenderPodDiskContainers(t *testing.T) {
	v := seedInstance(t)
	pod, err := RenderPod(v, testConfig())
	require.NoError(t, err)
	assert.Empty(t, pod.Spec.InitContainers)
	names := []string{}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	assert.Equal(t, launcherv1.ComputeContainer, names[0], "the launcher starts first")
	assert.Equal(t, launcherv1.ConsoleLogContainer, names[len(names)-1])
	compute := pod.Spec.Containers[0]
	require.NotNil(t, compute.Lifecycle)
	assert.Equal(t, []string{launcherv1.ContainerDiskBinary, "install", launcherv1.BinDir}, compute.Lifecycle.PostStart.Exec.Command)
	assert.Contains(t, compute.VolumeMounts, binMount)
	for _, c := range pod.Spec.Containers[1 : len(names)-1] {
		assert.Contains(t, c.VolumeMounts, binMount, c.Name)
		assert.Equal(t, path.Join(launcherv1.BinDir, path.Base(launcherv1.ContainerDiskBinary)), c.Command[0], c.Name)
	}

	noDisks := v.DeepCopy()
	noDisks.Spec.Volumes = nil
	noDisks.Spec.Domain.Devices.Disks = nil
	pod, err = RenderPod(noDisks, testConfig())
	require.NoError(t, err)
	assert.Nil(t, pod.Spec.Containers[0].Lifecycle)
	assert.NotContains(t, pod.Spec.Containers[0].VolumeMounts, binMount)
	assert.Len(t, pod.Spec.Containers, 2, "compute and guest-console-log")
}

// Multus networks become the launcher Pod's networks annotation (in the instance's namespace unless
// named NAMESPACE/NAME, each as the Pod interface the node agent bridges) and a tun device request;
// a malformed name is refused naming the field.
func TestMultusNetworksOfThePod(t *testing.T) {
	v := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"}}
	v.Spec.Networks = []virtv1.Network{
		{Name: "default", NetworkSource: virtv1.NetworkSource{Pod: &virtv1.PodNetwork{}}},
		{Name: "blue", NetworkSource: virtv1.NetworkSource{Multus: &virtv1.MultusNetwork{NetworkName: "blue-net"}}},
		{Name: "red", NetworkSource: virtv1.NetworkSource{Multus: &virtv1.MultusNetwork{NetworkName: "shared/red-net"}}},
	}
	got, err := multusAnnotation(v)
	require.NoError(t, err)
	assert.JSONEq(t, `[{"name":"blue-net","namespace":"ns","interface":"pod`+hashOf("blue")+`"},
		{"name":"red-net","namespace":"shared","interface":"pod`+hashOf("red")+`"}]`, got)
	res, err := computeResources(v, resource.MustParse("64Mi"), Config{UseEmulation: true})
	require.NoError(t, err)
	assert.Equal(t, "1", res.Limits.Name(launcherv1.TunResource, resource.DecimalSI).String())

	v.Spec.Networks[2].Multus.NetworkName = "a/b/c"
	_, err = multusAnnotation(v)
	assert.EqualError(t, err, `spec.networks[2].multus.networkName: "a/b/c" is not NAME or NAMESPACE/NAME`)

	v.Spec.Networks = v.Spec.Networks[:1]
	got, err = multusAnnotation(v)
	assert.NoError(t, err)
	assert.Empty(t, got, "no annotation without Multus networks")
}

// hashOf is the 11 hex digits of the network name's SHA-256 that its devices are named with.
func hashOf(network string) string {
	sum := sha256.Sum256([]byte(network))
	return hex.EncodeToString(sum[:])[:11]
}

// The instance's annotations of the user's own keys, kubevirt.io/ and kubernetes.io/ reach its
// launcher Pod; none that runtimes, CNI plugins, injectors, scrapers or node tooling act on: a
// tenant who may create instances but not Pods gains nothing of a Pod's through them.
func TestRenderPodCarriesAnnotations(t *testing.T) {
	v := seedInstance(t)
	carried := map[string]string{
		"kubevirt.io/test": "test", "kubernetes.io/test": "test", "testannotation": "from the vmi",
	}
	v.Annotations = map[string]string{
		"sidecar.istio.io/inject": "false",
		"linkerd.io/inject":       "enabled",
		"prometheus.io/scrape":    "true",
		"container.apparmor.security.beta.kubernetes.io/compute": "unconfined",
		"seccomp.security.alpha.kubernetes.io/pod":               "unconfined",
		"k8s.v1.cni.cncf.io/networks":                            "other-ns/secret-net",
		"v1.multus-cni.io/default-network":                       "other-ns/net",
		"cni.projectcalico.org/ipAddrs":                          `["10.0.0.5"]`,
		"ipam.cilium.io/ip-pool":                                 "other",
		"kubectl.kubernetes.io/default-container":                "volume-x",
		"kubernetes.io/config.mirror":                            "x",
		"io.kubernetes.cri-o.Devices":                            "/dev/sda",
		"io.katacontainers.config.hypervisor.path":               "/bin/sh",
		"sidecar.istio.io/userVolume":                            `{"h":{"hostPath":{"path":"/"}}}`,
		"sidecar.istio.io/proxyImage":                            "evil",
		"vault.hashicorp.com/agent-image":                        "evil",
		"pre.hook.backup.velero.io/command":                      `["sh","-c","id"]`,
		"cluster-autoscaler.kubernetes.io/safe-to-evict":         "false",
		"podvirt.io/anything":                                    "x",
	}
	for k, val := range carried {
		v.Annotations[k] = val
	}
	pod, err := RenderPod(v, testConfig())
	require.NoError(t, err)
	carried["kubectl.kubernetes.io/default-container"] = "compute"
	assert.Equal(t, carried, pod.Annotations)
}

// An instance whose CPU and memory limits equal its requests gets a launcher Pod of QoS class
// Guaranteed, as in KubeVirt: every container's requests equal its limits. Otherwise the helpers
// keep their small requests.
func TestRenderPodGuaranteed(t *testing.T) {
	equal := func(c corev1.Container) bool {
		for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			l, ok := c.Resources.Limits[n]
			if r := c.Resources.Requests[n]; !ok || l.Cmp(r) != 0 {
				return false
			}
		}
		return true
	}
	v := seedInstance(t)
	v.Spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64M")}
	v.Spec.Domain.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64M")}
	pod, err := RenderPod(v, testConfig())
	require.NoError(t, err)
	require.Greater(t, len(pod.Spec.Containers), 1)
	for _, c := range pod.Spec.Containers {
		assert.True(t, equal(c), "%s: %+v", c.Name, c.Resources)
	}

	delete(v.Spec.Domain.Resources.Limits, corev1.ResourceCPU)
	pod, err = RenderPod(v, testConfig())
	require.NoError(t, err)
	for _, c := range pod.Spec.Containers {
		assert.False(t, equal(c), "%s: Burstable without a CPU limit", c.Name)
	}
}
