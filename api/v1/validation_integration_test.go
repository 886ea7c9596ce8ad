package v1_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/testenv"
)

func discoveryFor(e *testenv.Env) (*discovery.DiscoveryClient, error) {
	return discovery.NewDiscoveryClientForConfig(e.Config)
}

func validVMISpec() virtv1.VirtualMachineInstanceSpec {
	return virtv1.VirtualMachineInstanceSpec{
		Domain: virtv1.DomainSpec{
			Resources: virtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64M")}},
			Devices: virtv1.Devices{
				Disks:      []virtv1.Disk{{Name: "root", Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}}},
				Interfaces: []virtv1.Interface{{Name: "default", Masquerade: &virtv1.InterfaceMasquerade{}, Ports: []virtv1.Port{{Name: "ssh", Port: 22}}}},
			},
		},
		Volumes:  []virtv1.Volume{{Name: "root", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "example/disk:1"}}}},
		Networks: []virtv1.Network{{Name: "default", NetworkSource: virtv1.NetworkSource{Pod: &virtv1.PodNetwork{}}}},
	}
}

func validVM(ns, name string) *virtv1.VirtualMachine {
	return &virtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: virtv1.VirtualMachineSpec{
			Running: ptr.To(false),
			Template: &virtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       validVMISpec(),
			},
		},
	}
}

func validReplicaSet(ns, name string, replicas int32) *virtv1.VirtualMachineInstanceReplicaSet {
	return &virtv1.VirtualMachineInstanceReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: virtv1.VirtualMachineInstanceReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: &virtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       validVMISpec(),
			},
		},
	}
}

func toUnstructured(t *testing.T, obj runtime.Object, gvk schema.GroupVersionKind) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	require.NoError(t, err)
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u
}

// set changes one field of an unstructured object; path elements that are ints index lists.
func set(t *testing.T, obj map[string]any, value any, path ...any) {
	t.Helper()
	cur := any(obj)
	for i, p := range path {
		last := i == len(path)-1
		switch key := p.(type) {
		case string:
			m := cur.(map[string]any)
			if last {
				if value == nil {
					delete(m, key)
				} else {
					m[key] = value
				}
				return
			}
			if m[key] == nil {
				m[key] = map[string]any{}
			}
			cur = m[key]
		case int:
			l := cur.([]any)
			if last {
				l[key] = value
				return
			}
			cur = l[key]
		}
	}
}

var vmiSpec = []any{"spec", "template", "spec"}

func at(prefix []any, rest ...any) []any { return append(append([]any{}, prefix...), rest...) }

func TestInvalidObjectsAreRejectedNamingTheField(t *testing.T) {
	e := testenv.Require(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)

	type mutation func(t *testing.T, obj map[string]any)
	setter := func(value any, path ...any) mutation {
		return func(t *testing.T, obj map[string]any) { set(t, obj, value, path...) }
	}
	vm := func() *unstructured.Unstructured {
		return toUnstructured(t, validVM(ns, "bad"), testenv.GVK("v1", "VirtualMachine"))
	}
	cases := []struct {
		name   string
		object func() *unstructured.Unstructured
		mutate mutation
		want   []string // substrings of the apiserver's message: the field path and what is wrong
	}{
		{"running and runStrategy together", vm, setter("Always", "spec", "runStrategy"),
			[]string{"spec:", "mutually exclusive"}},
		{"unknown runStrategy", vm, func(t *testing.T, o map[string]any) {
			set(t, o, nil, "spec", "running")
			set(t, o, "Sometimes", "spec", "runStrategy")
		}, []string{"spec.runStrategy", `"Sometimes"`, "Always"}},
		{"bad memory request", vm, setter("64X", at(vmiSpec, "domain", "resources", "requests", "memory")...),
			[]string{"spec.template.spec.domain.resources.requests.memory", "64X"}},
		{"bad guest memory", vm, setter("lots", at(vmiSpec, "domain", "memory", "guest")...),
			[]string{"spec.template.spec.domain.memory.guest", "lots"}},
		{"volume name that is a path", vm, setter("../../../../usr/bin", at(vmiSpec, "volumes", 0, "name")...),
			[]string{"spec.template.spec.volumes[0].name", "should match"}},
		{"disk names no volume", vm, setter("nosuch", at(vmiSpec, "domain", "devices", "disks", 0, "name")...),
			[]string{"spec.template.spec.domain.devices.disks", "every disk must name a volume in spec.volumes"}},
		{"duplicate volume names", vm, func(t *testing.T, o map[string]any) {
			vols := o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["volumes"].([]any)
			set(t, o, append(vols, map[string]any{"name": "root", "emptyDisk": map[string]any{"capacity": "1Gi"}}), at(vmiSpec, "volumes")...)
		}, []string{"spec.template.spec.volumes", "volume names must be unique"}},
		{"duplicate disk names", vm, func(t *testing.T, o map[string]any) {
			disks := o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["domain"].(map[string]any)["devices"].(map[string]any)["disks"].([]any)
			set(t, o, append(disks, map[string]any{"name": "root"}), at(vmiSpec, "domain", "devices", "disks")...)
		}, []string{"spec.template.spec.domain.devices.disks", "disk names must be unique"}},
		{"disk bus foo", vm, setter("foo", at(vmiSpec, "domain", "devices", "disks", 0, "disk", "bus")...),
			[]string{"spec.template.spec.domain.devices.disks[0].disk.bus", `"foo"`, "virtio"}},
		{"disk and cdrom on one disk", vm, setter(map[string]any{"bus": "sata"}, at(vmiSpec, "domain", "devices", "disks", 0, "cdrom")...),
			[]string{"spec.template.spec.domain.devices.disks[0]", "only one of disk, cdrom, lun"}},
		{"missing name", vm, func(t *testing.T, o map[string]any) { set(t, o, nil, "metadata", "name") },
			[]string{"name or generateName is required"}},
		{"volume without a name", vm, setter(map[string]any{"emptyDisk": map[string]any{"capacity": "1Gi"}}, at(vmiSpec, "volumes", 0)...),
			[]string{"spec.template.spec.volumes[0].name", "Required value"}},
		{"volume with two sources", vm, setter(map[string]any{"capacity": "1Gi"}, at(vmiSpec, "volumes", 0, "emptyDisk")...),
			[]string{"spec.template.spec.volumes[0]", "exactly one of containerDisk"}},
		{"containerDisk without image", vm, setter(map[string]any{"path": "/disk/x.qcow2"}, at(vmiSpec, "volumes", 0, "containerDisk")...),
			[]string{"spec.template.spec.volumes[0].containerDisk.image", "Required value"}},
		{"emptyDisk without capacity", vm, setter(map[string]any{"name": "root", "emptyDisk": map[string]any{}}, at(vmiSpec, "volumes", 0)...),
			[]string{"spec.template.spec.volumes[0].emptyDisk.capacity", "Required value"}},
		{"masquerade and bridge together", vm, setter(map[string]any{}, at(vmiSpec, "domain", "devices", "interfaces", 0, "bridge")...),
			[]string{"spec.template.spec.domain.devices.interfaces[0]", "only one of masquerade, bridge"}},
		{"port out of range", vm, setter(int64(70000), at(vmiSpec, "domain", "devices", "interfaces", 0, "ports", 0, "port")...),
			[]string{"spec.template.spec.domain.devices.interfaces[0].ports[0].port", "65535"}},
		{"unknown port protocol", vm, setter("XTP", at(vmiSpec, "domain", "devices", "interfaces", 0, "ports", 0, "protocol")...),
			[]string{"spec.template.spec.domain.devices.interfaces[0].ports[0].protocol", `"XTP"`}},
		{"interface names no network", vm, setter("elsewhere", at(vmiSpec, "domain", "devices", "interfaces", 0, "name")...),
			[]string{"spec.template.spec.domain.devices.interfaces", "every interface must name a network in spec.networks"}},
		{"unknown eviction strategy", vm, setter("Evaporate", at(vmiSpec, "evictionStrategy")...),
			[]string{"spec.template.spec.evictionStrategy", `"Evaporate"`}},
		{"negative grace period", vm, setter(int64(-1), at(vmiSpec, "terminationGracePeriodSeconds")...),
			[]string{"spec.template.spec.terminationGracePeriodSeconds", "greater than or equal to 0"}},
		{"VM without template", vm, func(t *testing.T, o map[string]any) { set(t, o, nil, "spec", "template") },
			[]string{"spec.template", "Required value"}},
		{"VMI without domain", func() *unstructured.Unstructured {
			return toUnstructured(t, &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"}}, testenv.GVK("v1", "VirtualMachineInstance"))
		}, func(t *testing.T, o map[string]any) { set(t, o, nil, "spec", "domain") },
			[]string{"spec.domain", "Required value"}},
		{"negative replicas", func() *unstructured.Unstructured {
			return toUnstructured(t, validReplicaSet(ns, "bad", 1), testenv.GVK("v1", "VirtualMachineInstanceReplicaSet"))
		}, setter(int64(-1), "spec", "replicas"),
			[]string{"spec.replicas", "must be 0 or more"}},
		{"migration without vmiName", func() *unstructured.Unstructured {
			return toUnstructured(t, &virtv1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"}, Spec: virtv1.VirtualMachineInstanceMigrationSpec{VMIName: "vm"}}, testenv.GVK("v1", "VirtualMachineInstanceMigration"))
		}, func(t *testing.T, o map[string]any) { set(t, o, nil, "spec", "vmiName") },
			[]string{"spec.vmiName", "Required value"}},
		{"v1alpha3 gets the same validation", func() *unstructured.Unstructured {
			return toUnstructured(t, validVM(ns, "bad"), testenv.GVK("v1alpha3", "VirtualMachine"))
		}, setter("Always", "spec", "runStrategy"),
			[]string{"mutually exclusive"}},
	}
	require.GreaterOrEqual(t, len(cases), 15)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := tc.object()
			// The unmodified object is valid: the rejection below is caused by the mutation alone.
			dry := obj.DeepCopy()
			require.NoError(t, e.Client.Create(ctx, dry, client.DryRunAll), "the base object must be valid")
			tc.mutate(t, obj.Object)
			msg := errorMessage(t, e.Client.Create(ctx, obj))
			for _, w := range tc.want {
				assert.Contains(t, msg, w)
			}
		})
	}
}
