package controllers_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	itv1beta1 "github.com/podvirt/podvirt/api/instancetype/v1beta1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/testenv"
)

// A VM made from an instancetype and a preference gets instances sized by the instancetype and
// filled in by the preference, from revisions pinned at its first start: editing the instancetype
// afterwards changes neither its next instance nor the revision it records.
func TestInstancetypeAndPreferencePinnedAtFirstStart(t *testing.T) {
	e := testenv.Require(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	startControllers(t, ns)

	it := &itv1beta1.VirtualMachineInstancetype{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "small"},
		Spec: itv1beta1.VirtualMachineInstancetypeSpec{CPU: itv1beta1.CPUInstancetype{Guest: 2}, Memory: itv1beta1.MemoryInstancetype{Guest: resource.MustParse("128Mi")}}}
	pref := &itv1beta1.VirtualMachinePreference{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prefs"},
		Spec: itv1beta1.VirtualMachinePreferenceSpec{
			CPU:     &itv1beta1.CPUPreferences{PreferredCPUTopology: ptr.To(itv1beta1.Cores)},
			Devices: &itv1beta1.DevicePreferences{PreferredDiskBus: virtv1.DiskBusSATA, PreferredRng: &virtv1.Rng{}},
		}}
	require.NoError(t, e.Client.Create(ctx, it))
	require.NoError(t, e.Client.Create(ctx, pref))

	vm := newVM(ns, "sized", virtv1.RunStrategyAlways)
	vm.Spec.Template.Spec.Domain.Resources.Requests = nil
	vm.Spec.Instancetype = &virtv1.InstancetypeMatcher{Kind: "VirtualMachineInstancetype", Name: "small"}
	vm.Spec.Preference = &virtv1.PreferenceMatcher{Kind: "VirtualMachinePreference", Name: "prefs"}
	require.NoError(t, e.Client.Create(ctx, vm))

	var first *virtv1.VirtualMachineInstance
	eventually(t, "an instance", func() bool { first = instance(t, ns, "sized"); return first != nil })
	d := first.Spec.Domain
	assert.Equal(t, [3]uint32{1, 2, 1}, [3]uint32{d.CPU.Sockets, d.CPU.Cores, d.CPU.Threads}, "2 vCPUs as cores")
	assert.Equal(t, "128Mi", d.Memory.Guest.String())
	assert.Equal(t, virtv1.DiskBusSATA, d.Devices.Disks[0].Disk.Bus)
	assert.NotNil(t, d.Devices.Rng)

	var st virtv1.VirtualMachineStatus
	eventually(t, "both revisions recorded", func() bool {
		st = vmStatus(t, ns, "sized")
		return st.InstancetypeRef != nil && st.PreferenceRef != nil
	})
	require.NotNil(t, st.InstancetypeRef.ControllerRevisionRef)
	pinned := st.InstancetypeRef.ControllerRevisionRef.Name
	rev := &appsv1.ControllerRevision{}
	require.NoError(t, e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pinned}, rev))
	assert.Equal(t, "sized", rev.OwnerReferences[0].Name, "the VM owns its revisions")

	// The instancetype grows; the VM restarts on the revision it pinned.
	it.Spec.CPU.Guest = 8
	require.NoError(t, e.Client.Update(ctx, it))
	uid := first.UID
	appendRequests(t, ns, "sized",
		virtv1.VirtualMachineStateChangeRequest{Action: virtv1.StopRequest, UID: &uid},
		virtv1.VirtualMachineStateChangeRequest{Action: virtv1.StartRequest})
	var second *virtv1.VirtualMachineInstance
	eventually(t, "restarted", func() bool {
		second = instance(t, ns, "sized")
		return second != nil && second.UID != uid
	})
	assert.Equal(t, 2, second.Spec.Domain.VCPUs(), "still the pinned instancetype")
	assert.Equal(t, pinned, vmStatus(t, ns, "sized").InstancetypeRef.ControllerRevisionRef.Name)
}

// A VM naming an instancetype that does not exist gets no instance and says why.
func TestMissingInstancetypeSaysSo(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	startControllers(t, ns)
	vm := newVM(ns, "nosuch", virtv1.RunStrategyAlways)
	vm.Spec.Template.Spec.Domain.Resources.Requests = nil
	vm.Spec.Instancetype = &virtv1.InstancetypeMatcher{Name: "u1.nonexistent"}
	require.NoError(t, e.Client.Create(context.Background(), vm))
	eventually(t, "a failure condition naming the instancetype", func() bool {
		c := condition(vmStatus(t, ns, "nosuch").Conditions, virtv1.VirtualMachineFailure)
		return c.Status == metav1.ConditionTrue && c.Reason == "FailedCreate" &&
			strings.Contains(c.Message, "spec.instancetype.name") && strings.Contains(c.Message, "u1.nonexistent")
	})
	assert.Nil(t, instance(t, ns, "nosuch"))
}
