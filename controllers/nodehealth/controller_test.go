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
	clk := clocktesting.NewFakePassiveClock(now)
	r := &Reconciler{Client: c, Recorder: events.NewFakeRecorder(10), Namespace: "podvirt", Threshold: time.Minute, Clock: clk}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(lease)}

	// The renew time an hour old means nothing to this controller: it first sees the lease now.
	res, err := r.Reconcile(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, time.Minute+time.Second, res.RequeueAfter, "look again once the threshold has passed")
	clk.SetTime(now.Add(time.Minute + time.Second))
	_, err = r.Reconcile(ctx, req)
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

// Heartbeats are judged by this controller's clock: a node whose clock is far behind or ahead is
// neither failed nor spared for it; what counts is when its renewal was seen to change, and only
// while the controller is in contact with the control plane (an outage gives every node a fresh
// threshold once contact resumes).
func TestHeartbeatJudgedByTheObserversClock(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	renewed := func(at time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "podvirt", Name: heartbeatv1.LeaseName("n1")},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent"), RenewTime: ptr.To(metav1.NewMicroTime(at))}}
	}
	clk := clocktesting.NewFakePassiveClock(now)
	contact := &Contact{Clock: clk}
	r := &Reconciler{Threshold: time.Minute, Clock: clk, contact: contact}
	judge := func(l *coordinationv1.Lease) bool {
		stale, _, err := r.stale(ctx, l)
		require.NoError(t, err)
		return stale
	}

	contact.record(true, now)
	skewed := now.Add(-90 * time.Second) // the node's clock is 90 s behind
	assert.False(t, judge(renewed(skewed)), "a renewal the node stamped 90 s in the past is fresh when seen now")
	for i := 1; i <= 10; i++ { // renewed every 10 s by the node's clock, seen as it happens
		clk.SetTime(now.Add(time.Duration(i) * 10 * time.Second))
		assert.False(t, judge(renewed(skewed.Add(time.Duration(i)*10*time.Second))), "renewing node, renewal %d", i)
	}
	last := renewed(skewed.Add(100 * time.Second))
	clk.SetTime(now.Add(100*time.Second + time.Minute))
	assert.False(t, judge(last), "at the threshold")
	clk.SetTime(now.Add(100*time.Second + time.Minute + time.Second))
	assert.True(t, judge(last), "past the threshold since the last renewal was seen")

	// A node clock far ahead hides nothing.
	ahead := renewed(now.Add(time.Hour))
	clk.SetTime(now)
	r.seen = sightings{}
	assert.False(t, judge(ahead))
	clk.SetTime(now.Add(time.Minute + time.Second))
	assert.True(t, judge(ahead), "a renew time in the future does not keep a silent node alive")

	// The control plane away for 5 minutes: nobody renews, nothing is judged, and every node gets a
	// full threshold once contact resumes.
	r.seen = sightings{}
	clk.SetTime(now)
	assert.False(t, judge(renewed(now)))
	contact.record(false, now.Add(time.Second))
	_, ok := contact.Since()
	assert.True(t, ok, "one failed probe is not an outage")
	for range ProbeFailures - 1 {
		contact.record(false, now.Add(2*time.Second))
	}
	clk.SetTime(now.Add(5 * time.Minute))
	assert.False(t, judge(renewed(now)), "no contact: not judged")
	contact.record(true, now.Add(5*time.Minute))
	clk.SetTime(now.Add(5*time.Minute + 30*time.Second))
	assert.False(t, judge(renewed(now)), "30 s after contact resumed, within the threshold")
	clk.SetTime(now.Add(6*time.Minute + time.Second))
	assert.True(t, judge(renewed(now)), "a threshold after contact resumed and still no renewal")
}

// A cache that lags behind the uncached read presents the previous renewal again: that is not a new
// renewal (it would otherwise flip the sighting for ever and hide a dead node).
func TestSightingsDoNotGoBack(t *testing.T) {
	var s sightings
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	assert.Equal(t, t0, s.see("l", "r1", t0))
	assert.Equal(t, t0.Add(time.Second), s.see("l", "r2", t0.Add(time.Second)))
	assert.Equal(t, t0.Add(time.Second), s.see("l", "r1", t0.Add(2*time.Second)), "the previous renewal again")
	assert.Equal(t, t0.Add(3*time.Second), s.see("l", "r3", t0.Add(3*time.Second)))
}
