package controllers_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/apiserver/lifecycle"
	"github.com/podvirt/podvirt/internal/testenv"
)

// call applies what a start/stop/restart call decides (apiserver/lifecycle) to the VM in the real
// apiserver, as virt-api does: a JSON patch of the spec or of the status subresource.
func call(t *testing.T, ns, name string, decide func(*virtv1.VirtualMachine, *virtv1.VirtualMachineInstance) (lifecycle.Patch, error)) error {
	t.Helper()
	vm, ok := get(t, &virtv1.VirtualMachine{}, ns, name)
	require.True(t, ok, "vm %s", name)
	p, err := decide(vm, instance(t, ns, name))
	if err != nil {
		return err
	}
	return applyPatch(t, vm, p)
}

func applyPatch(t *testing.T, vm *virtv1.VirtualMachine, p lifecycle.Patch) error {
	t.Helper()
	body, err := p.JSON()
	require.NoError(t, err)
	if p.Status {
		return env.Client.Status().Patch(context.Background(), vm, client.RawPatch(types.JSONPatchType, body))
	}
	return env.Client.Patch(context.Background(), vm, client.RawPatch(types.JSONPatchType, body))
}

func start(vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance) (lifecycle.Patch, error) {
	return lifecycle.Start(vm, vmi, false)
}

// The subresources' patches drive the shipped controllers through a whole life: Halted → start →
// running → restart (a new instance) → stop; and a Manual VM through requests, started paused.
func TestSubresourceCallsDriveTheVM(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	startControllers(t, ns)
	ctx := context.Background()

	require.NoError(t, e.Client.Create(ctx, newVM(ns, "vm", virtv1.RunStrategyHalted)))
	eventually(t, "Stopped", func() bool { return vmStatus(t, ns, "vm").PrintableStatus == virtv1.VirtualMachineStatusStopped })
	err := call(t, ns, "vm", lifecycle.Stop)
	assert.True(t, apierrors.IsConflict(err), "stop of a Halted VM: 409, got %v", err)

	require.NoError(t, call(t, ns, "vm", start))
	var first *virtv1.VirtualMachineInstance
	eventually(t, "started", func() bool { first = instance(t, ns, "vm"); return first != nil })
	err = call(t, ns, "vm", start)
	assert.True(t, apierrors.IsConflict(err), "start of a running Always VM: 409, got %v", err)

	runPod(t, first, "node-a")
	eventually(t, "scheduled", func() bool { return instance(t, ns, "vm").Status.Phase == virtv1.Scheduled })
	setInstancePhase(t, ns, "vm", virtv1.Running)
	require.NoError(t, call(t, ns, "vm", lifecycle.Restart))
	eventually(t, "restarted: a new instance", func() bool {
		kubeletDeletes(t, ns)
		v := instance(t, ns, "vm")
		return v != nil && v.UID != first.UID && len(vmStatus(t, ns, "vm").StateChangeRequests) == 0
	})

	require.NoError(t, call(t, ns, "vm", lifecycle.Stop))
	eventually(t, "stopped", func() bool {
		kubeletDeletes(t, ns)
		vm, _ := get(t, &virtv1.VirtualMachine{}, ns, "vm")
		return instance(t, ns, "vm") == nil && vm.Spec.EffectiveRunStrategy() == virtv1.RunStrategyHalted
	})

	require.NoError(t, e.Client.Create(ctx, newVM(ns, "manual", virtv1.RunStrategyManual)))
	eventually(t, "manual: Stopped", func() bool { return vmStatus(t, ns, "manual").PrintableStatus == virtv1.VirtualMachineStatusStopped })
	require.NoError(t, call(t, ns, "manual", func(vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance) (lifecycle.Patch, error) {
		return lifecycle.Start(vm, vmi, true)
	}))
	eventually(t, "manual: started paused", func() bool {
		v := instance(t, ns, "manual")
		return v != nil && v.Spec.StartStrategy != nil && *v.Spec.StartStrategy == virtv1.StartStrategyPaused
	})
}

// A call computed from a stale read fails on its test op and changes nothing.
func TestStaleSubresourceCallChangesNothing(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	ctx := context.Background()
	require.NoError(t, e.Client.Create(ctx, newVM(ns, "vm", virtv1.RunStrategyManual)))
	stale, _ := get(t, &virtv1.VirtualMachine{}, ns, "vm")
	startReq, err := lifecycle.Start(stale, nil, false) // computed before the change below
	require.NoError(t, err)

	vm := stale.DeepCopy()
	vm.Status.StateChangeRequests = []virtv1.VirtualMachineStateChangeRequest{{Action: virtv1.StopRequest}}
	require.NoError(t, e.Client.Status().Update(ctx, vm))

	err = applyPatch(t, stale, startReq)
	require.Error(t, err, "the test op must refuse a patch computed from a stale read")
	after, _ := get(t, &virtv1.VirtualMachine{}, ns, "vm")
	assert.Equal(t, vm.Status.StateChangeRequests, after.Status.StateChangeRequests, "nothing half-applied")
	// virt-api turns exactly this answer into a 409 (apiserver.isTestFailed): 422 Invalid, naming
	// no object and no field.
	var se apierrors.APIStatus
	require.ErrorAs(t, err, &se)
	st := se.Status()
	assert.Equal(t, int32(422), st.Code)
	assert.Equal(t, metav1.StatusReasonInvalid, st.Reason)
	if st.Details != nil {
		assert.Empty(t, st.Details.Name)
		assert.Empty(t, st.Details.Causes)
	}
}
