package admission

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/scheme"
)

func TestEvictionInterceptor(t *testing.T) {
	instance := func(name string, strategy virtv1.EvictionStrategy, migratable metav1.ConditionStatus) *virtv1.VirtualMachineInstance {
		v := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
			Spec:   virtv1.VirtualMachineInstanceSpec{EvictionStrategy: ptr.To(strategy)},
			Status: virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Running, NodeName: "node-a", LauncherPod: "virt-launcher-" + name}}
		v.Status.Conditions = []metav1.Condition{{Type: virtv1.VirtualMachineInstanceLiveMigratable, Status: migratable, Reason: "R"}}
		return v
	}
	pod := func(name, owner string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{launcherv1.AppLabel: launcherv1.AppLabelValue},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance", Name: owner, UID: types.UID("uid-" + owner), Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: "node-a"}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&virtv1.VirtualMachineInstance{}).WithObjects(
		instance("mig", virtv1.EvictionStrategyLiveMigrate, metav1.ConditionTrue),
		instance("dry", virtv1.EvictionStrategyLiveMigrate, metav1.ConditionTrue),
		instance("stop", virtv1.EvictionStrategyNone, metav1.ConditionTrue),
		instance("maybe", virtv1.EvictionStrategyLiveMigrateIfPossible, metav1.ConditionFalse),
		pod("virt-launcher-mig", "mig"), pod("virt-launcher-mig-old", "mig"), pod("virt-launcher-dry", "dry"),
		pod("virt-launcher-stop", "stop"), pod("virt-launcher-maybe", "maybe"),
		instance("tired", virtv1.EvictionStrategyLiveMigrate, metav1.ConditionTrue), pod("virt-launcher-tired", "tired"),
		instance("tries", virtv1.EvictionStrategyLiveMigrate, metav1.ConditionTrue), pod("virt-launcher-tries", "tries"),
		instance("ext", virtv1.EvictionStrategyExternal, metav1.ConditionFalse), pod("virt-launcher-ext", "ext"),
		instance("ext-tired", virtv1.EvictionStrategyExternal, metav1.ConditionFalse), pod("virt-launcher-ext-tired", "ext-tired"),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}},
	).WithLists(&virtv1.VirtualMachineInstanceMigrationList{Items: append(
		failedEvacuations("tired", "node-a", virtv1.MaxEvacuationAttempts),
		append(failedEvacuations("tries", "node-a", virtv1.MaxEvacuationAttempts-1),
			failedEvacuations("ext-tired", "node-a", virtv1.MaxEvacuationAttempts)...)...)}).Build()
	h := evictionInterceptor{client: c, policy: Static(Policy{ExternalEviction: true})}
	for _, tc := range []struct {
		pod    string
		dryRun bool
		denied bool
	}{
		{pod: "web"},
		{pod: "virt-launcher-stop"},
		{pod: "virt-launcher-maybe"},   // not live-migratable: it stops instead
		{pod: "virt-launcher-mig-old"}, // not the instance's launcher Pod (a completed source)
		{pod: "gone"},
		{pod: "virt-launcher-dry", dryRun: true, denied: true},
		{pod: "virt-launcher-mig", denied: true},
		{pod: "virt-launcher-tired"},                   // its evacuation gave up: the drain ends
		{pod: "virt-launcher-tries", denied: true},     // one attempt left
		{pod: "virt-launcher-ext", denied: true},       // External: marked, for another controller, even when not migratable
		{pod: "virt-launcher-ext-tired", denied: true}, // External: Podvirt's own failed attempts do not count
	} {
		t.Run(tc.pod, func(t *testing.T) {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: "ns", Name: tc.pod, SubResource: "eviction", DryRun: ptr.To(tc.dryRun)}}
			resp := h.Handle(t.Context(), req)
			assert.Equal(t, !tc.denied, resp.Allowed, "%+v", resp.Result)
			if tc.denied {
				assert.EqualValues(t, 429, resp.Result.Code)
				assert.Contains(t, resp.Result.Message, "Eviction triggered evacuation of VMI ns/")
			}
		})
	}
	for name, want := range map[string]string{"mig": "node-a", "dry": "", "stop": "", "ext": "node-a"} {
		v := &virtv1.VirtualMachineInstance{}
		require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: name}, v))
		assert.Equal(t, want, v.Status.EvacuationNodeName, name)
	}

	// A cluster that no longer allows External evicts such an instance's Pod as with None.
	h.policy = Static(Policy{})
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: "ns", Name: "virt-launcher-ext-tired", SubResource: "eviction", DryRun: ptr.To(false)}}
	assert.True(t, h.Handle(t.Context(), req).Allowed)
}

// failedEvacuations are n failed migrations that tried to move vmi off node.
func failedEvacuations(vmi, node string, n int) []virtv1.VirtualMachineInstanceMigration {
	var out []virtv1.VirtualMachineInstanceMigration
	for i := range n {
		out = append(out, virtv1.VirtualMachineInstanceMigration{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("kubevirt-evacuation-%s-%d", vmi, i), Annotations: map[string]string{virtv1.EvacuationNodeAnnotation: node}, CreationTimestamp: metav1.Now()},
			Spec:       virtv1.VirtualMachineInstanceMigrationSpec{VMIName: vmi},
			Status:     virtv1.VirtualMachineInstanceMigrationStatus{Phase: virtv1.MigrationFailed},
		})
	}
	return out
}

// An instance that sets no evictionStrategy has the cluster's default: the KubeVirt object's in
// Podvirt's namespace, never one a tenant created in its own.
func TestEvictionUsesTheClusterDefault(t *testing.T) {
	live := virtv1.EvictionStrategyLiveMigrate
	kv := func(ns string) *virtv1.KubeVirt {
		return &virtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubevirt"},
			Spec: virtv1.KubeVirtSpec{Configuration: virtv1.KubeVirtConfiguration{EvictionStrategy: &live}}}
	}
	vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain", UID: "uid-plain"},
		Status: virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Running, NodeName: "node-a", LauncherPod: "virt-launcher-plain",
			Conditions: []metav1.Condition{{Type: virtv1.VirtualMachineInstanceLiveMigratable, Status: metav1.ConditionTrue, Reason: "R"}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-plain", Labels: map[string]string{launcherv1.AppLabel: launcherv1.AppLabelValue},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance", Name: "plain", UID: "uid-plain", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: "node-a"}}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: "ns", Name: pod.Name, SubResource: "eviction", DryRun: ptr.To(true)}}
	for _, tc := range []struct {
		kvNamespace string
		migrates    bool
	}{{"podvirt", true}, {"ns", false}} {
		c := fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&virtv1.VirtualMachineInstance{}).
			WithObjects(vmi.DeepCopy(), pod.DeepCopy(), kv(tc.kvNamespace)).Build()
		h := evictionInterceptor{client: c, policy: FromCluster(Policy{}, c, "podvirt")}
		resp := h.Handle(t.Context(), req)
		assert.Equal(t, !tc.migrates, resp.Allowed, "KubeVirt object in %s: %+v", tc.kvNamespace, resp.Result)
	}
}
