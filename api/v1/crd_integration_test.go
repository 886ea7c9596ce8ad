package v1_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

func readManifest(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	obj := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal(raw, &obj.Object))
	return obj
}

func TestSeedManifestAppliesInV1alpha3AndReadsBackInBothVersions(t *testing.T) {
	e := testenv.Require(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)

	seed := readManifest(t, testenv.RepoPath("examples", "vm-cirros.yaml"))
	require.Equal(t, "kubevirt.io/v1alpha3", seed.GetAPIVersion(), "the seed must stay unchanged")
	seed.SetNamespace(ns)
	require.NoError(t, e.Client.Create(ctx, seed))

	for _, version := range []string{"v1", "v1alpha3"} {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(testenv.GVK(version, "VirtualMachine"))
		require.NoError(t, e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vm-cirros"}, got), version)
		assert.Equal(t, "kubevirt.io/"+version, got.GetAPIVersion())
		// Nothing of the seed was pruned: its spec reads back unchanged in every served version.
		assert.Equal(t, seed.Object["spec"], got.Object["spec"], version)
		assert.Equal(t, "vm-cirros", got.GetLabels()["kubevirt.io/vm"])
	}

	typed := &virtv1.VirtualMachine{}
	require.NoError(t, e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vm-cirros"}, typed))
	require.NotNil(t, typed.Spec.Running)
	assert.False(t, *typed.Spec.Running)
	vmi := typed.Spec.Template.Spec
	assert.Equal(t, "64M", vmi.Domain.Resources.Requests.Memory().String())
	assert.Equal(t, "kubevirt/cirros-container-disk-demo:latest", vmi.Volumes[0].ContainerDisk.Image)
	assert.Equal(t, "vm-cirros", typed.Spec.Template.ObjectMeta.Labels["kubevirt.io/vm"], "template metadata must not be pruned")
}

func TestV1VirtualMachineReadsBackInBothVersions(t *testing.T) {
	e := testenv.Require(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)

	always := virtv1.RunStrategyAlways
	vm := validVM(ns, "demo")
	vm.Spec.Running = nil
	vm.Spec.RunStrategy = &always
	require.NoError(t, e.Client.Create(ctx, vm))

	old := &unstructured.Unstructured{}
	old.SetGroupVersionKind(testenv.GVK("v1alpha3", "VirtualMachine"))
	require.NoError(t, e.Client.Get(ctx, client.ObjectKeyFromObject(vm), old))
	strategy, _, _ := unstructured.NestedString(old.Object, "spec", "runStrategy")
	assert.Equal(t, "Always", strategy)
	bus, _, _ := unstructured.NestedFieldNoCopy(old.Object, "spec", "template", "spec", "domain", "devices", "disks")
	assert.Equal(t, "virtio", bus.([]any)[0].(map[string]any)["disk"].(map[string]any)["bus"])
}

// tableColumns fetches a list as a server-side Table, as kubectl get does.
func tableColumns(t *testing.T, e *testenv.Env, ns, resource string) *metav1.Table {
	t.Helper()
	cfg := rest.CopyConfig(e.Config)
	cfg.GroupVersion = &virtv1.SchemeGroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(e.Scheme).WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	require.NoError(t, err)
	raw, err := rc.Get().Namespace(ns).Resource(resource).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		DoRaw(context.Background())
	require.NoError(t, err)
	table := &metav1.Table{}
	require.NoError(t, yaml.Unmarshal(raw, table))
	return table
}

func columnNames(table *metav1.Table) []string {
	var names []string
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
	}
	return names
}

func TestPrinterColumnsThroughTheAPIServer(t *testing.T) {
	e := testenv.Require(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)

	vm := validVM(ns, "printed")
	require.NoError(t, e.Client.Create(ctx, vm))
	vm.Status.PrintableStatus = virtv1.VirtualMachineStatusStopped
	vm.Status.Conditions = []metav1.Condition{{Type: virtv1.VirtualMachineReady, Status: metav1.ConditionFalse, Reason: "NotRunning", LastTransitionTime: metav1.Now()}}
	require.NoError(t, e.Client.Status().Update(ctx, vm))

	vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "printed"}, Spec: vm.Spec.Template.Spec}
	require.NoError(t, e.Client.Create(ctx, vmi))
	vmi.Status.Phase = virtv1.Running
	vmi.Status.NodeName = "node-a"
	vmi.Status.Interfaces = []virtv1.VirtualMachineInstanceNetworkInterface{{Name: "default", IP: "10.244.0.7"}}
	vmi.Status.Conditions = []metav1.Condition{{Type: virtv1.VirtualMachineInstanceReady, Status: metav1.ConditionTrue, Reason: "GuestRunning", LastTransitionTime: metav1.Now()}}
	require.NoError(t, e.Client.Status().Update(ctx, vmi))

	rs := validReplicaSet(ns, "printed", 3)
	require.NoError(t, e.Client.Create(ctx, rs))
	rs.Status.Replicas, rs.Status.ReadyReplicas = 2, 1
	require.NoError(t, e.Client.Status().Update(ctx, rs))

	vmTable := tableColumns(t, e, ns, "virtualmachines")
	assert.Equal(t, []string{"Name", "Age", "Status", "Ready"}, columnNames(vmTable))
	require.Len(t, vmTable.Rows, 1)
	assert.Equal(t, []any{"printed", vmTable.Rows[0].Cells[1], "Stopped", "False"}, vmTable.Rows[0].Cells)

	vmiTable := tableColumns(t, e, ns, "virtualmachineinstances")
	assert.Equal(t, []string{"Name", "Age", "Phase", "IP", "NodeName", "Ready"}, columnNames(vmiTable))
	require.Len(t, vmiTable.Rows, 1)
	assert.Equal(t, []any{"printed", vmiTable.Rows[0].Cells[1], "Running", "10.244.0.7", "node-a", "True"}, vmiTable.Rows[0].Cells)

	rsTable := tableColumns(t, e, ns, "virtualmachineinstancereplicasets")
	assert.Equal(t, []string{"Name", "Desired", "Current", "Ready", "Age"}, columnNames(rsTable))
	require.Len(t, rsTable.Rows, 1)
	assert.Equal(t, []any{"printed", float64(3), float64(2), float64(1)}, rsTable.Rows[0].Cells[:4])
}

func TestReplicaSetScaleSubresource(t *testing.T) {
	e := testenv.Require(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)

	rs := validReplicaSet(ns, "scaled", 1)
	require.NoError(t, e.Client.Create(ctx, rs))
	rs.Status.LabelSelector = "app=scaled"
	require.NoError(t, e.Client.Status().Update(ctx, rs))

	scale := &autoscalingv1.Scale{}
	require.NoError(t, e.Client.SubResource("scale").Get(ctx, rs, scale))
	assert.EqualValues(t, 1, scale.Spec.Replicas)
	assert.Equal(t, "app=scaled", scale.Status.Selector)

	scale.Spec.Replicas = 5
	require.NoError(t, e.Client.SubResource("scale").Update(ctx, rs, client.WithSubResourceBody(scale)))
	require.NoError(t, e.Client.Get(ctx, client.ObjectKeyFromObject(rs), rs))
	assert.EqualValues(t, 5, *rs.Spec.Replicas)
}

func TestShortNamesAndCategories(t *testing.T) {
	e := testenv.Require(t, env)
	dc, err := discoveryFor(e)
	require.NoError(t, err)
	list, err := dc.ServerResourcesForGroupVersion("kubevirt.io/v1")
	require.NoError(t, err)
	want := map[string][]string{
		"virtualmachines":                   {"vm", "vms"},
		"virtualmachineinstances":           {"vmi", "vmis"},
		"virtualmachineinstancereplicasets": {"vmirs", "vmirss"},
		"virtualmachineinstancemigrations":  {"vmim", "vmims"},
	}
	found := 0
	for _, r := range list.APIResources {
		if short, ok := want[r.Name]; ok {
			found++
			assert.Equal(t, short, r.ShortNames, r.Name)
			assert.Contains(t, r.Categories, "all", r.Name)
		}
	}
	assert.Equal(t, len(want), found)
	old, err := dc.ServerResourcesForGroupVersion("kubevirt.io/v1alpha3")
	require.NoError(t, err)
	assert.NotEmpty(t, old.APIResources)
}

// errorMessage is the apiserver's message for an invalid object.
func errorMessage(t *testing.T, err error) string {
	t.Helper()
	require.Error(t, err, "the apiserver accepted an invalid object")
	require.Truef(t, apierrors.IsInvalid(err) || apierrors.IsBadRequest(err), "want Invalid, got %v", err)
	return strings.ReplaceAll(err.Error(), "\n", " ")
}
