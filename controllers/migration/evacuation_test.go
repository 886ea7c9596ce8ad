package migration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/scheme"
)

// An evacuation creates migrations labelled with the node they empty, and gives up after
// MaxEvacuationAttempts failed ones, saying so: the eviction webhook then lets the drain through.
func TestEvacuationGivesUp(t *testing.T) {
	for _, failed := range []int{virtv1.MaxEvacuationAttempts - 1, virtv1.MaxEvacuationAttempts} {
		t.Run(fmt.Sprintf("%d failed", failed), func(t *testing.T) {
			ctx := context.Background()
			inst := &virtv1.VirtualMachineInstance{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"},
				Status: virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Running, NodeName: "node-a", EvacuationNodeName: "node-a",
					MigrationState: &virtv1.VirtualMachineInstanceMigrationState{MigrationUID: "last", Failed: true, FailureReason: "the target Pod could not be scheduled"}},
			}
			var objs []client.Object
			objs = append(objs, inst)
			for i := range failed {
				objs = append(objs, &virtv1.VirtualMachineInstanceMigration{
					ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("kubevirt-evacuation-%d", i), Annotations: map[string]string{virtv1.EvacuationNodeAnnotation: "node-a"}, CreationTimestamp: metav1.NewTime(t0)},
					Spec:       virtv1.VirtualMachineInstanceMigrationSpec{VMIName: "vm"},
					Status:     virtv1.VirtualMachineInstanceMigrationStatus{Phase: virtv1.MigrationFailed},
				})
			}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithStatusSubresource(objs...).Build()
			rec := events.NewFakeRecorder(10)
			r := &EvacuationReconciler{Client: c, Recorder: rec, Clock: clocktesting.NewFakePassiveClock(t0.Add(EvacuationRetry * 10))}
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(inst)})
			require.NoError(t, err)
			list := &virtv1.VirtualMachineInstanceMigrationList{}
			require.NoError(t, c.List(ctx, list))
			ev := <-rec.Events
			if failed < virtv1.MaxEvacuationAttempts {
				require.Len(t, list.Items, failed+1, "one more attempt")
				assert.Contains(t, ev, ReasonEvacuating)
				for _, m := range list.Items {
					assert.Equal(t, "node-a", m.Annotations[virtv1.EvacuationNodeAnnotation])
				}
				return
			}
			assert.Len(t, list.Items, failed, "no more attempts")
			assert.True(t, strings.Contains(ev, ReasonEvacuationFailed) && strings.Contains(ev, "could not be scheduled"), ev)
		})
	}
}

// An instance whose evictionStrategy is External is left to the controller that handles it: its
// evacuation mark creates no migration.
func TestExternalEvacuationIsNotMigrated(t *testing.T) {
	ctx := context.Background()
	inst := &virtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"},
		Spec:       virtv1.VirtualMachineInstanceSpec{EvictionStrategy: ptr.To(virtv1.EvictionStrategyExternal)},
		Status:     virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Running, NodeName: "node-a", EvacuationNodeName: "node-a"},
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(inst).WithStatusSubresource(inst).Build()
	r := &EvacuationReconciler{Client: c, Recorder: events.NewFakeRecorder(10), Clock: clocktesting.NewFakePassiveClock(t0)}
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(inst)})
	require.NoError(t, err)
	list := &virtv1.VirtualMachineInstanceMigrationList{}
	require.NoError(t, c.List(ctx, list))
	assert.Empty(t, list.Items)
}
