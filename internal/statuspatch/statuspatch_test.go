package statuspatch

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/scheme"
)

func TestResult(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "virtualmachines"}, "vm", errors.New("stale"))
	pass, write := errors.New("pass failed"), errors.New("write failed")
	later := ctrl.Result{RequeueAfter: 7}
	for _, tc := range []struct {
		name              string
		passErr, writeErr error
		wantRes           ctrl.Result
		wantErrs          []error
	}{
		{"all well keeps the pass's result", nil, nil, later, nil},
		{"conflict requeues quickly without error", nil, conflict, ctrl.Result{RequeueAfter: ConflictRetry}, nil},
		{"write error", nil, write, ctrl.Result{}, []error{write}},
		{"pass error wins over a conflict", pass, conflict, ctrl.Result{}, []error{pass}},
		{"both errors are kept", pass, write, ctrl.Result{}, []error{pass, write}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Result(later, tc.passErr, tc.writeErr)
			assert.Equal(t, tc.wantRes, res)
			if tc.wantErrs == nil {
				assert.NoError(t, err)
			}
			for _, want := range tc.wantErrs {
				assert.ErrorIs(t, err, want)
			}
		})
	}
}

func TestWrite(t *testing.T) {
	ctx := context.Background()
	vm := &virtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(vm).WithStatusSubresource(vm).Build()
	get := func() *virtv1.VirtualMachine {
		got := &virtv1.VirtualMachine{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(vm), got))
		return got
	}

	orig := get()
	unchanged := orig.DeepCopy()
	wrote, err := Write(ctx, c, orig, unchanged, "VirtualMachine")
	require.NoError(t, err)
	assert.False(t, wrote, "an unchanged status is not written")

	changed := orig.DeepCopy()
	changed.Status.PrintableStatus = virtv1.VirtualMachineStatusStopped
	wrote, err = Write(ctx, c, orig, changed, "VirtualMachine")
	require.NoError(t, err)
	assert.True(t, wrote)
	assert.Equal(t, virtv1.VirtualMachineStatusStopped, get().Status.PrintableStatus)

	stale := orig.DeepCopy() // read before the write above
	stale.Status.PrintableStatus = virtv1.VirtualMachineStatusRunning
	_, err = Write(ctx, c, orig, stale, "VirtualMachine")
	assert.True(t, apierrors.IsConflict(err), "a status computed from a stale read loses the lock: %v", err)
	assert.ErrorContains(t, err, "write VirtualMachine status")
	assert.Equal(t, virtv1.VirtualMachineStatusStopped, get().Status.PrintableStatus, "nothing overwritten")

	latest := get()
	require.NoError(t, c.Delete(ctx, latest.DeepCopy()))
	gone := latest.DeepCopy()
	gone.Status.PrintableStatus = virtv1.VirtualMachineStatusRunning
	wrote, err = Write(ctx, c, latest, gone, "VirtualMachine")
	assert.NoError(t, err, "an object that is gone is not an error")
	assert.False(t, wrote)
}

func TestOwnWritesTellAStaleReadFromAFreshOne(t *testing.T) {
	ctx := context.Background()
	vm := &virtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "uid"}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(vm).WithStatusSubresource(vm).Build()
	var w OwnWrites
	orig := &virtv1.VirtualMachine{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(vm), orig))
	assert.False(t, w.Behind(orig), "nothing written yet")

	wrote, err := w.Write(ctx, c, orig, orig.DeepCopy(), "VirtualMachine")
	require.NoError(t, err)
	require.False(t, wrote)
	assert.False(t, w.Behind(orig), "an unchanged status is not a write")

	changed := orig.DeepCopy()
	changed.Status.PrintableStatus = virtv1.VirtualMachineStatusStopped
	wrote, err = w.Write(ctx, c, orig, changed, "VirtualMachine")
	require.NoError(t, err)
	require.True(t, wrote)
	assert.True(t, w.Behind(orig), "a cache still holding the version the write replaced is behind")
	assert.True(t, w.Behind(orig), "and stays behind until it moves")

	fresh := &virtv1.VirtualMachine{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(vm), fresh))
	assert.False(t, w.Behind(fresh), "the cache has the write")
	assert.False(t, w.Behind(orig), "the write is forgotten once seen")
}
