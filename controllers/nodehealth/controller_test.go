package nodehealth

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/scheme"
)

// An instance failed for its node keeps its launcher Pod deleted: a deletion that failed once is
// made again at the next look, although the instance is already final.
func TestLauncherPodOfAFailedNodeIsDeletedAgain(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "podvirt", Name: heartbeatv1.LeaseName("gone")},
		Spec: coordinationv1.LeaseSpec{RenewTime: ptr.To(metav1.NewMicroTime(now.Add(-time.Hour)))}}
	vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"},
		Status: virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Running, NodeName: "gone", LauncherPod: "virt-launcher-vm-x"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-vm-x"}}
	deletes := 0
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(lease, vmi, pod).WithStatusSubresource(vmi).
		WithIndex(&virtv1.VirtualMachineInstance{}, NodeNameIndex, func(o client.Object) []string {
			return []string{o.(*virtv1.VirtualMachineInstance).Status.NodeName}
		}).
		WithInterceptorFuncs(interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
			if deletes++; deletes == 1 {
				return errors.New("apiserver unavailable")
			}
			return c.Delete(ctx, o, opts...)
		}}).Build()
	r := &Reconciler{Client: c, Recorder: events.NewFakeRecorder(10), Namespace: "podvirt", Threshold: time.Minute, Clock: clocktesting.NewFakePassiveClock(now)}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(lease)}

	_, err := r.Reconcile(ctx, req)
	require.ErrorContains(t, err, "delete launcher pod of vm")
	got := &virtv1.VirtualMachineInstance{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(vmi), got))
	assert.Equal(t, virtv1.Failed, got.Status.Phase)
	assert.Equal(t, virtv1.ReasonNodeUnresponsive, got.Status.Reason)

	_, err = r.Reconcile(ctx, req)
	require.NoError(t, err)
	assert.True(t, apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})), "the Pod is deleted at the next look")
	_, err = r.Reconcile(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, 2, deletes, "nothing left to delete")
}
