package admission

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

func spec() virtv1.VirtualMachineInstanceSpec {
	return virtv1.VirtualMachineInstanceSpec{Domain: virtv1.DomainSpec{
		Resources: virtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64M")}},
		Devices:   virtv1.Devices{Interfaces: []virtv1.Interface{{Name: "default"}}},
	}}
}

func TestValidateInstanceSpec(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*virtv1.VirtualMachineInstanceSpec)
		want   string // the field path named, "" when valid
	}{
		{"valid", func(*virtv1.VirtualMachineInstanceSpec) {}, ""},
		{"no memory", func(s *virtv1.VirtualMachineInstanceSpec) { s.Domain.Resources.Requests = nil }, "spec.domain.resources.requests.memory"},
		{"limit below guest", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Domain.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32M")}
		}, "spec.domain.resources.limits.memory"},
		{"kernel boot without container", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Domain.Firmware = &virtv1.Firmware{KernelBoot: &virtv1.KernelBoot{KernelArgs: "console=ttyS0"}}
		}, "spec.domain.firmware.kernelBoot.container"},
		{"kernel boot without kernel", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Domain.Firmware = &virtv1.Firmware{KernelBoot: &virtv1.KernelBoot{Container: &virtv1.KernelBootContainer{Image: "k", InitrdPath: "/i"}}}
		}, "spec.domain.firmware.kernelBoot.container.kernelPath"},
		{"cdrom on virtio", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.Disks = []virtv1.Disk{{Name: "ok", CDRom: &virtv1.CDRomTarget{Bus: virtv1.DiskBusSATA}}, {Name: "bad", CDRom: &virtv1.CDRomTarget{Bus: virtv1.DiskBusVirtio}}}
		}, "spec.domain.devices.disks[1].cdrom.bus"},
		{"another architecture", func(s *virtv1.VirtualMachineInstanceSpec) { s.Architecture = "riscv64" }, "spec.architecture"},
		{"synic without vpindex", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Domain.Features = &virtv1.Features{Hyperv: &virtv1.FeatureHyperv{SyNIC: &virtv1.FeatureState{}}}
		}, "spec.domain.features.hyperv.synic"},
		{"few spinlock retries", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Domain.Features = &virtv1.Features{Hyperv: &virtv1.FeatureHyperv{Spinlocks: &virtv1.FeatureSpinlocks{Retries: ptr.To(uint32(100))}}}
		}, "spec.domain.features.hyperv.spinlocks.spinlocks"},
		{"volume name climbing out of its mount root", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Volumes = []virtv1.Volume{{Name: "../../../../usr/local/bin", VolumeSource: virtv1.VolumeSource{ConfigMap: &virtv1.ConfigMapVolumeSource{}}}}
		}, "spec.volumes[0].name"},
		{"disk name with a slash", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.Disks = []virtv1.Disk{{Name: "a/b"}}
		}, "spec.domain.devices.disks[0].name"},
		{"host disk elsewhere", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Volumes = []virtv1.Volume{{Name: "h", VolumeSource: virtv1.VolumeSource{HostDisk: &virtv1.HostDisk{Path: "/var/lib/podvirt/hostdisks/ns/../../../etc/shadow", Type: virtv1.HostDiskExists}}}}
		}, "spec.volumes[0].hostDisk.path"},
		{"another namespace's host disk", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Volumes = []virtv1.Volume{{Name: "h", VolumeSource: virtv1.VolumeSource{HostDisk: &virtv1.HostDisk{Path: "/var/lib/podvirt/hostdisks/other/a.img", Type: virtv1.HostDiskExists}}}}
		}, "spec.volumes[0].hostDisk.path"},
		{"host disk without capacity", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Volumes = []virtv1.Volume{{Name: "h", VolumeSource: virtv1.VolumeSource{HostDisk: &virtv1.HostDisk{Path: "/var/lib/podvirt/hostdisks/ns/a.img", Type: virtv1.HostDiskExistsOrCreate}}}}
		}, "spec.volumes[0].hostDisk.capacity"},
		{"device name not a resource", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.GPUs = []virtv1.GPU{{Name: "ok", DeviceName: "nvidia.com/A10"}, {Name: "bad", DeviceName: "A10"}}
		}, "spec.domain.devices.gpus[1].deviceName"},
		{"reserved device name", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.HostDevices = []virtv1.HostDevice{{Name: "kvm", DeviceName: "devices.kubevirt.io/kvm"}}
		}, "spec.domain.devices.hostDevices[0].deviceName"},
		{"huge pages", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Domain.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("64Mi")
			s.Domain.Memory = &virtv1.Memory{Hugepages: &virtv1.Hugepages{PageSize: "2Mi"}}
		}, ""},
		{"huge page size the nodes do not have", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Domain.Memory = &virtv1.Memory{Hugepages: &virtv1.Hugepages{PageSize: "4Mi"}}
		}, "spec.domain.memory.hugepages.pageSize"},
		{"guest memory not whole huge pages", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Domain.Memory = &virtv1.Memory{Hugepages: &virtv1.Hugepages{PageSize: "2Mi"}} // 64M is 30.5 pages
		}, "spec.domain.memory.hugepages.pageSize"},
		{"probes", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Networks = []virtv1.Network{{Name: "default", NetworkSource: virtv1.NetworkSource{Pod: &virtv1.PodNetwork{}}}}
			s.ReadinessProbe = &virtv1.Probe{ProbeHandler: virtv1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(80)}}}
		}, ""},
		{"probe on a named port", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.ReadinessProbe = &virtv1.Probe{ProbeHandler: virtv1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}}
		}, "spec.readinessProbe.httpGet.port"},
		{"probe without a handler", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.ReadinessProbe = &virtv1.Probe{PeriodSeconds: 5}
		}, "spec.readinessProbe.httpGet"},
		{"probe without a pod interface", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.Interfaces = nil
			s.Domain.Devices.AutoattachPodInterface = ptr.To(false)
			s.ReadinessProbe = &virtv1.Probe{ProbeHandler: virtv1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}}
		}, "spec.readinessProbe.httpGet"},
		{"firmware uuid not a UUID", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Domain.Firmware = &virtv1.Firmware{UUID: "../../../var/run/podvirt/pvc/data"}
		}, "spec.domain.firmware.uuid"},
		{"liveness probe", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Networks = []virtv1.Network{{Name: "default", NetworkSource: virtv1.NetworkSource{Pod: &virtv1.PodNetwork{}}}}
			s.LivenessProbe = &virtv1.Probe{ProbeHandler: virtv1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}}
		}, ""},
		{"liveness probe on a named port", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.LivenessProbe = &virtv1.Probe{ProbeHandler: virtv1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}}
		}, "spec.livenessProbe.httpGet.port"},
		{"tcp liveness probe", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.LivenessProbe = &virtv1.Probe{ProbeHandler: virtv1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(22)}}}
		}, "spec.livenessProbe.tcpSocket"},
		{"tcp probe", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.ReadinessProbe = &virtv1.Probe{ProbeHandler: virtv1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(22)}}}
		}, "spec.readinessProbe.tcpSocket"},
		{"config disk label longer than an ISO volume id", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Volumes = []virtv1.Volume{{Name: "c", VolumeSource: virtv1.VolumeSource{ConfigMap: &virtv1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, VolumeLabel: strings.Repeat("L", 33)}}}}
		}, "spec.volumes[0].configMap.volumeLabel"},
		{"secure boot without SMM", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Domain.Firmware = &virtv1.Firmware{Bootloader: &virtv1.Bootloader{EFI: &virtv1.EFI{}}}
			s.Domain.Features = &virtv1.Features{SMM: &virtv1.FeatureState{Enabled: ptr.To(false)}}
		}, "spec.domain.features.smm.enabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec()
			tc.mutate(&s)
			errs := ValidateInstanceSpec(&s, "ns", Policy{HostDisk: true}, field.NewPath("spec"))
			if tc.want == "" {
				assert.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1, "%v", errs)
			assert.Equal(t, tc.want, errs[0].Field)
		})
	}
}

// What the cluster allows of the node: host disks only behind their feature gate, disks the node
// creates at most the policy's capacity, Multus networks of other namespaces only when allowed.
func TestPolicy(t *testing.T) {
	hostDisk := func(capacity string) virtv1.Volume {
		return virtv1.Volume{Name: "h", VolumeSource: virtv1.VolumeSource{HostDisk: &virtv1.HostDisk{
			Path: "/var/lib/podvirt/hostdisks/ns/a.img", Type: virtv1.HostDiskExistsOrCreate, Capacity: resource.MustParse(capacity)}}}
	}
	emptyDisk := func(capacity string) virtv1.Volume {
		return virtv1.Volume{Name: "e", VolumeSource: virtv1.VolumeSource{EmptyDisk: &virtv1.EmptyDiskSource{Capacity: resource.MustParse(capacity)}}}
	}
	multus := func(name string) func(*virtv1.VirtualMachineInstanceSpec) {
		return func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Networks = append(s.Networks, virtv1.Network{Name: "blue", NetworkSource: virtv1.NetworkSource{Multus: &virtv1.MultusNetwork{NetworkName: name}}})
			s.Domain.Devices.Interfaces = append(s.Domain.Devices.Interfaces, virtv1.Interface{Name: "blue", Bridge: &virtv1.InterfaceBridge{}})
		}
	}
	podCIDR := func(v4, v6 string) func(*virtv1.VirtualMachineInstanceSpec) {
		return func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Networks = []virtv1.Network{{Name: "default", NetworkSource: virtv1.NetworkSource{Pod: &virtv1.PodNetwork{VMNetworkCIDR: v4, VMIPv6NetworkCIDR: v6}}}}
			s.Domain.Devices.Interfaces = []virtv1.Interface{{Name: "default", Masquerade: &virtv1.InterfaceMasquerade{}}}
		}
	}
	for _, tc := range []struct {
		name   string
		policy Policy
		mutate func(*virtv1.VirtualMachineInstanceSpec)
		want   string // the field named, "" when admitted
	}{
		{"host disk without the gate", Policy{}, func(s *virtv1.VirtualMachineInstanceSpec) { s.Volumes = []virtv1.Volume{hostDisk("1Gi")} }, "spec.volumes[0].hostDisk"},
		{"host disk with the gate", Policy{HostDisk: true}, func(s *virtv1.VirtualMachineInstanceSpec) { s.Volumes = []virtv1.Volume{hostDisk("1Gi")} }, ""},
		{"a 1 PiB host disk", Policy{HostDisk: true}, func(s *virtv1.VirtualMachineInstanceSpec) { s.Volumes = []virtv1.Volume{hostDisk("1Pi")} }, "spec.volumes[0].hostDisk.capacity"},
		{"a 1 PiB empty disk", Policy{}, func(s *virtv1.VirtualMachineInstanceSpec) { s.Volumes = []virtv1.Volume{emptyDisk("1Pi")} }, "spec.volumes[0].emptyDisk.capacity"},
		{"an empty disk within a lowered bound", Policy{MaxDiskCapacity: resource.MustParse("2Gi")}, func(s *virtv1.VirtualMachineInstanceSpec) { s.Volumes = []virtv1.Volume{emptyDisk("2Gi")} }, ""},
		{"an empty disk past a lowered bound", Policy{MaxDiskCapacity: resource.MustParse("2Gi")}, func(s *virtv1.VirtualMachineInstanceSpec) { s.Volumes = []virtv1.Volume{emptyDisk("3Gi")} }, "spec.volumes[0].emptyDisk.capacity"},
		{"own namespace's network", Policy{}, multus("blue-net"), ""},
		{"own namespace's network named with it", Policy{}, multus("ns/blue-net"), ""},
		{"another namespace's network", Policy{}, multus("other/blue-net"), "spec.networks[0].multus.networkName"},
		{"another namespace's network, allowed", Policy{CrossNamespaceNetworks: true}, multus("other/blue-net"), ""},
		{"a guest CIDR with leading zeros, as KubeVirt reads it", Policy{}, podCIDR("10.10.010.0/24", ""), ""},
		{"a guest CIDR that is not one", Policy{}, podCIDR("10.0.0.0", ""), "spec.networks[0].pod"},
		{"a guest CIDR too small for a gateway", Policy{}, podCIDR("10.0.0.0/31", ""), "spec.networks[0].pod"},
		{"an IPv6 guest CIDR given as IPv4", Policy{}, podCIDR("", "10.0.0.0/24"), "spec.networks[0].pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec()
			tc.mutate(&s)
			errs := ValidateInstanceSpec(&s, "ns", tc.policy, field.NewPath("spec"))
			if tc.want == "" {
				assert.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1, "%v", errs)
			assert.Equal(t, tc.want, errs[0].Field)
		})
	}
	var p Policy
	require.NoError(t, p.EnableFeatures("HostDisk, "))
	assert.True(t, p.HostDisk)
	assert.ErrorContains(t, p.EnableFeatures("HostDisk,Snapshot"), `unknown feature gate "Snapshot" (known: HostDisk)`)
}

func TestDefaults(t *testing.T) {
	s := spec()
	DefaultInstance(&s)
	assert.Equal(t, virtv1.DefaultMachineType, s.Domain.Machine.Type)
	assert.Equal(t, virtv1.DefaultInterfaceModel, s.Domain.Devices.Interfaces[0].Model)
	s.Domain.Machine.Type, s.Domain.Devices.Interfaces[0].Model = "pc-q35-7.2", "e1000"
	DefaultInstance(&s)
	assert.Equal(t, "pc-q35-7.2", s.Domain.Machine.Type, "a given value is kept")
	assert.Equal(t, "e1000", s.Domain.Devices.Interfaces[0].Model)

	// Only limits: the requests default to them, as Kubernetes defaults a container's; a given
	// request is kept.
	s.Domain.Resources = virtv1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("128Mi")},
	}
	DefaultInstance(&s)
	assert.Equal(t, "1", s.Domain.Resources.Requests.Cpu().String())
	assert.Equal(t, "64Mi", s.Domain.Resources.Requests.Memory().String())
}

func TestInstanceSpecIsImmutable(t *testing.T) {
	old := spec()
	grace := old.DeepCopy()
	grace.TerminationGracePeriodSeconds = ptr.To(int64(5))
	assert.Empty(t, ValidateInstanceUpdate(&old, grace), "the grace period may change")
	changed := old.DeepCopy()
	changed.Domain.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("128M")
	errs := ValidateInstanceUpdate(&old, changed)
	require.Len(t, errs, 1)
	assert.Equal(t, "spec", errs[0].Field)
}

func TestVMWarnsOnRunningAndValidatesItsTemplate(t *testing.T) {
	vm := &virtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm"}, Spec: virtv1.VirtualMachineSpec{
		Running: ptr.To(true), Template: &virtv1.VirtualMachineInstanceTemplateSpec{Spec: spec()}}}
	warnings, err := vmValidator{}.ValidateCreate(context.Background(), vm)
	require.NoError(t, err)
	assert.Equal(t, []string{RunningDeprecated}, []string(warnings))

	vm.Spec.Template.Spec.Domain.Resources.Requests = nil
	_, err = vmValidator{}.ValidateCreate(context.Background(), vm)
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.ErrorContains(t, err, `VirtualMachine.kubevirt.io "vm" is invalid: spec.template.spec.domain.resources.requests.memory`)
}
