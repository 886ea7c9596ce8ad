package migration

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/controllers/podtemplate"
	"github.com/podvirt/podvirt/internal/scheme"
)

// A target Pod the apiserver refuses (a quota, a webhook) leaves the migration Pending, to be tried
// again, with a FailedCreate Event: a phase written as if the Pod existed would make the next pass
// take it for deleted and fail the migration.
func TestRefusedTargetPodLeavesTheMigrationPending(t *testing.T) {
	ctx := context.Background()
	m := &virtv1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mig", UID: "m-uid", Finalizers: []string{virtv1.MigrationFinalizer}},
		Spec:       virtv1.VirtualMachineInstanceMigrationSpec{VMIName: "vm"},
		Status:     virtv1.VirtualMachineInstanceMigrationStatus{Phase: virtv1.MigrationPending},
	}
	inst := &virtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "vmi-uid"},
		Status: virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Running, NodeName: "node-a", LauncherPod: "source",
			MigrationState: &virtv1.VirtualMachineInstanceMigrationState{MigrationUID: "m-uid", SourceNode: "node-a", SourcePod: "source", TargetPod: "target"}},
	}
	guest := resource.MustParse("64Mi")
	inst.Spec.Domain.Memory = &virtv1.Memory{Guest: &guest}
	quota := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "target", errQuota)
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(m, inst).WithStatusSubresource(m, inst).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			return quota
		}}).Build()
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Client: c, APIReader: c, Recorder: rec, Clock: clocktesting.NewFakePassiveClock(t0),
		Config: podtemplate.Config{LauncherImage: "launcher", UseEmulation: true}}

	for range 3 {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(m)})
		require.ErrorIs(t, err, quota)
	}
	got := &virtv1.VirtualMachineInstanceMigration{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(m), got))
	assert.Equal(t, virtv1.MigrationPending, got.Status.Phase)
	cur := &virtv1.VirtualMachineInstance{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(inst), cur))
	assert.False(t, cur.Status.MigrationState.Failed, "the instance's migration state is not failed")
	ev := <-rec.Events
	assert.True(t, strings.Contains(ev, virtv1.ReasonFailedCreate) && strings.Contains(ev, "exceeded quota"), ev)
}

var errQuota = errors.New("exceeded quota: pods")
