package vm

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/scheme"
)

// A pass whose status write loses the optimistic lock must not have done anything the next pass
// cannot see: a failed RerunOnFailure instance is rerun even when the first pass's write is lost.
func TestRerunSurvivesALostStatusWrite(t *testing.T) {
	ctx := context.Background()
	vm := mkVM(withStrategy(virtv1.RunStrategyRerunOnFailure), applied(virtv1.RunStrategyRerunOnFailure))
	vm.Spec.Template = &virtv1.VirtualMachineInstanceTemplateSpec{}
	failed := &virtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: vm.Name, Namespace: vm.Namespace, UID: "first", Finalizers: []string{virtv1.VirtualMachineControllerFinalizer},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: virtv1.GroupVersion.String(), Kind: "VirtualMachine", Name: vm.Name, UID: vm.UID, Controller: ptr.To(true)}}},
		Status: virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Failed,
			PhaseTransitionTimestamps: []virtv1.VirtualMachineInstancePhaseTransitionTimestamp{{Phase: virtv1.Running}}},
	}
	lost := 0
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(vm, failed).WithStatusSubresource(vm, failed).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			if lost == 0 {
				lost++
				return apierrors.NewConflict(schema.GroupResource{Group: virtv1.GroupVersion.Group, Resource: "virtualmachines"}, o.GetName(), nil)
			}
			return c.SubResource(sub).Patch(ctx, o, p, opts...)
		}}).Build()
	r := &Reconciler{Client: c, APIReader: c, Recorder: events.NewFakeRecorder(100), Clock: clocktesting.NewFakePassiveClock(now)}
	key := client.ObjectKeyFromObject(vm)

	for range 5 {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		require.NoError(t, err)
		// Play the VMI controller: a deleted instance's finalizer goes once its Pod is gone.
		cur := &virtv1.VirtualMachineInstance{}
		if err := c.Get(ctx, key, cur); err == nil && cur.DeletionTimestamp != nil {
			cur.Finalizers = nil
			require.NoError(t, c.Update(ctx, cur))
		}
	}
	require.Equal(t, 1, lost, "the first status write was lost")
	next := &virtv1.VirtualMachineInstance{}
	require.NoError(t, c.Get(ctx, key, next), "the failed instance was rerun")
	require.NotEqual(t, failed.UID, next.UID)
}

// A start held back (here: waiting for a claim) is not a start: RerunOnFailure and Once VMs, which
// start only while their strategy is not yet recorded, start once the claim appears.
func TestHeldBackStartHappensLater(t *testing.T) {
	for _, strategy := range []virtv1.VirtualMachineRunStrategy{virtv1.RunStrategyRerunOnFailure, virtv1.RunStrategyOnce} {
		t.Run(string(strategy), func(t *testing.T) {
			ctx := context.Background()
			vm := mkVM(withStrategy(strategy))
			vm.Spec.Template = &virtv1.VirtualMachineInstanceTemplateSpec{Spec: virtv1.VirtualMachineInstanceSpec{Volumes: []virtv1.Volume{{
				Name: "data", VolumeSource: virtv1.VolumeSource{PersistentVolumeClaim: &virtv1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}},
			}}}}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(vm).WithStatusSubresource(vm).Build()
			r := &Reconciler{Client: c, APIReader: c, Recorder: events.NewFakeRecorder(100), Clock: clocktesting.NewFakePassiveClock(now)}
			key := client.ObjectKeyFromObject(vm)
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
			require.NoError(t, err)
			require.True(t, apierrors.IsNotFound(c.Get(ctx, key, &virtv1.VirtualMachineInstance{})), "no instance without its claim")

			require.NoError(t, c.Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: "data"}}))
			_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
			require.NoError(t, err)
			require.NoError(t, c.Get(ctx, key, &virtv1.VirtualMachineInstance{}), "started once the claim exists")
		})
	}
}
