package nodehealth

import (
	"context"
	"errors"
	"fmt"
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
	assert.Equal(t, t0, s.see(renewedLease("n", "r1", ""), t0))
	assert.Equal(t, t0.Add(time.Second), s.see(renewedLease("n", "r2", ""), t0.Add(time.Second)))
	assert.Equal(t, t0.Add(time.Second), s.see(renewedLease("n", "r1", ""), t0.Add(2*time.Second)), "the previous renewal again")
	assert.Equal(t, t0.Add(3*time.Second), s.see(renewedLease("n", "r3", ""), t0.Add(3*time.Second)))
}

// renewedLease is node's heartbeat lease held by holder (standing for a renewal) with the
// confirmation mark confirmed ("": none) and one peer.
func renewedLease(node, holder, confirmed string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "podvirt", Name: heartbeatv1.LeaseName(node),
		Annotations: map[string]string{heartbeatv1.AnnotationPeers: "1", heartbeatv1.AnnotationAddress: "10.0.0.1:8186"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), RenewTime: ptr.To(metav1.NewMicroTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))}}
	if confirmed != "" {
		l.Annotations[heartbeatv1.AnnotationConfirmed] = confirmed
	}
	return l
}

// The sightings record a lapse's end (a renewal seen more than LapseGap after the one before) and a
// confirmation mark's change, each when seen; a lease seen for the first time counts as marked.
func TestSightingsRecordLapsesAndMarks(t *testing.T) {
	var s sightings
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	s.see(renewedLease("n", "r1", ""), t0)
	v := s.view(heartbeatv1.LeaseName("n"))
	assert.Equal(t, heartbeatv1.Sighting{Node: "n", Changed: t0, Marked: t0, Peers: 1, Answers: true}, v, "first sight")
	s.see(renewedLease("n", "r2", ""), t0.Add(heartbeatv1.LapseGap))
	assert.True(t, s.view(heartbeatv1.LeaseName("n")).GapEnded.IsZero(), "a renewal LapseGap after the last is no lapse")
	at := t0.Add(2*heartbeatv1.LapseGap + time.Second)
	s.see(renewedLease("n", "r3", ""), at)
	assert.Equal(t, at, s.view(heartbeatv1.LeaseName("n")).GapEnded, "a lapse ended")
	s.see(renewedLease("n", "r3", "1"), at.Add(time.Second))
	v = s.view(heartbeatv1.LeaseName("n"))
	assert.Equal(t, at.Add(time.Second), v.Marked, "the mark moved")
	assert.Equal(t, at, v.Changed, "the renewal did not")
}

// A stale node whose peers may be cut off with it, or have vouched for it, is not failed over until
// FailoverWindow after the last sign of that, and an Event says why; a lone agent's node never.
func TestFailoverWaitsForTheOtherAgents(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	stale, other := renewedLease("n2", "a", ""), renewedLease("n1", "b", "")
	c, r, clk, phase := twoNodes(t, now, stale, other)
	rec := r.Recorder.(*events.FakeRecorder)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(stale)}
	renew := func(holder, confirmed string) {
		l := &coordinationv1.Lease{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(other), l))
		l.Spec.HolderIdentity = ptr.To(holder)
		if confirmed != "" {
			l.Annotations[heartbeatv1.AnnotationConfirmed] = confirmed
		}
		require.NoError(t, c.Update(ctx, l))
	}
	reconcileAt := func(at time.Time) ctrl.Result { // the other lease as its watch would, then the stale one
		clk.SetTime(at)
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(other)})
		require.NoError(t, err)
		res, err := r.Reconcile(ctx, req)
		require.NoError(t, err)
		return res
	}

	reconcileAt(now)
	// n1 renews every 10 s, but lapses once for 30 s, 40 s before n2's threshold ends.
	for s := 10; s <= 40; s += 10 {
		clk.SetTime(now.Add(time.Duration(s) * time.Second))
		renew(fmt.Sprint("b", s), "")
		reconcileAt(clk.Now())
	}
	renew("b70", "") // seen at 81 s: a lapse of 41 s ended
	res := reconcileAt(now.Add(81 * time.Second))
	assert.Equal(t, virtv1.Running, phase(), "a lapse of another agent ended just now")
	assert.Equal(t, heartbeatv1.FailoverWindow+time.Second, res.RequeueAfter)
	assert.Contains(t, <-rec.Events, "n1 renewed its heartbeat after a lapse")

	renew("b100", "1") // n1 marks a confirmation, seen at 100 s
	reconcileAt(now.Add(100 * time.Second))
	reconcileAt(now.Add(100*time.Second + heartbeatv1.FailoverWindow - time.Second))
	assert.Equal(t, virtv1.Running, phase(), "within the window of the mark")
	for len(rec.Events) > 0 {
		<-rec.Events
	}

	at := now.Add(100*time.Second + heartbeatv1.FailoverWindow)
	res = reconcileAt(at) // n1 last renewed at 100 s: now lapsed itself
	assert.Equal(t, virtv1.Running, phase(), "the other agent has lapsed: both may be cut off together")
	assert.Contains(t, <-rec.Events, "n1 has not renewed its heartbeat for 1m10s either")

	renew("b-fresh", "1")
	clk.SetTime(at.Add(time.Second))
	reconcileAt(clk.Now()) // the lapse ended: another window
	at = at.Add(time.Second + heartbeatv1.FailoverWindow)
	for s := time.Duration(0); s < heartbeatv1.FailoverWindow; s += 10 * time.Second {
		clk.SetTime(at.Add(-heartbeatv1.FailoverWindow + s))
		renew(fmt.Sprint("b-", s), "1")
		reconcileAt(clk.Now())
	}
	reconcileAt(at.Add(time.Second))
	assert.Equal(t, virtv1.Failed, phase(), "the other agent renews and marked nothing for a window: failed over")

	// A node whose agent listed no peer is never failed over.
	lone := renewedLease("n3", "c", "")
	lone.Annotations[heartbeatv1.AnnotationPeers] = "0"
	require.NoError(t, c.Create(ctx, lone))
	clk.SetTime(at.Add(10 * time.Minute))
	renew("b-late", "1")
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(lone)})
	require.NoError(t, err)
	clk.SetTime(at.Add(20 * time.Minute))
	renew("b-later", "1")
	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(lone)})
	require.NoError(t, err)
	for len(rec.Events) > 1 {
		<-rec.Events
	}
	assert.Contains(t, <-rec.Events, "listed no other agent")
}

// A lease deleted while its agent was lapsed (its Node deleted while cut off) still holds failovers
// back until its agent's answers can no longer keep a guest running.
func TestDeletedLapsedLeaseStillHoldsFailoverBack(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	stale, gone := renewedLease("n2", "a", ""), renewedLease("n1", "b", "")
	c, r, clk, phase := twoNodes(t, now, stale, gone)
	reconcile := func(l *coordinationv1.Lease) {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(l)})
		require.NoError(t, err)
	}
	reconcile(gone)
	reconcile(stale)
	require.NoError(t, c.Delete(ctx, gone))
	clk.SetTime(now.Add(2 * time.Minute))
	reconcile(gone)
	reconcile(stale)
	assert.Equal(t, virtv1.Running, phase(), "the deleted lease's agent may still confirm n2's outage")
	clk.SetTime(now.Add(heartbeatv1.ConfirmHorizon - time.Second))
	reconcile(stale)
	assert.Equal(t, virtv1.Running, phase())
	clk.SetTime(now.Add(heartbeatv1.ConfirmHorizon + time.Second))
	reconcile(stale)
	assert.Equal(t, virtv1.Failed, phase(), "past the horizon")
}

// twoNodes is a Reconciler (80 s threshold, a fake clock at now, a recorder of 100 Events) over a
// fake client holding the leases and an instance running on n2, whose phase phase reads.
func twoNodes(t *testing.T, now time.Time, leases ...*coordinationv1.Lease) (client.Client, *Reconciler, *clocktesting.FakePassiveClock, func() virtv1.VirtualMachineInstancePhase) {
	vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"},
		Status: virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Running, NodeName: "n2"}}
	b := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(vmi).WithStatusSubresource(vmi).
		WithIndex(&virtv1.VirtualMachineInstance{}, NodeNameIndex, func(o client.Object) []string {
			return []string{o.(*virtv1.VirtualMachineInstance).Status.NodeName}
		})
	for _, l := range leases {
		b = b.WithObjects(l)
	}
	c := b.Build()
	clk := clocktesting.NewFakePassiveClock(now)
	r := &Reconciler{Client: c, Recorder: events.NewFakeRecorder(100), Namespace: "podvirt", Threshold: 80 * time.Second, Clock: clk}
	return c, r, clk, func() virtv1.VirtualMachineInstancePhase {
		got := &virtv1.VirtualMachineInstance{}
		require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(vmi), got))
		return got.Status.Phase
	}
}

// Rule 3: a node whose agent's heartbeat is stale is not failed over while its kubelet still renews
// its lease (the agent is away, not the node); once the kubelet's lease is stale too, it is.
func TestAgentAwayOnALiveNodeIsNotFailedOver(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	agent := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "podvirt", Name: heartbeatv1.LeaseName("n1")},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent"), RenewTime: ptr.To(metav1.NewMicroTime(now))}}
	kubelet := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: "n1"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("n1"), RenewTime: ptr.To(metav1.NewMicroTime(now))}}
	vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"},
		Status: virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Running, NodeName: "n1"}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(agent, kubelet, vmi).WithStatusSubresource(vmi).
		WithIndex(&virtv1.VirtualMachineInstance{}, NodeNameIndex, func(o client.Object) []string {
			return []string{o.(*virtv1.VirtualMachineInstance).Status.NodeName}
		}).Build()
	clk := clocktesting.NewFakePassiveClock(now)
	rec := events.NewFakeRecorder(100)
	r := &Reconciler{Client: c, Recorder: rec, Namespace: "podvirt", Threshold: time.Minute, Clock: clk}
	reconcile := func(l *coordinationv1.Lease) ctrl.Result {
		call := r.Reconcile
		if l.Namespace == corev1.NamespaceNodeLease {
			call = r.seeKubelet
		}
		res, err := call(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(l)})
		require.NoError(t, err)
		return res
	}
	phase := func() virtv1.VirtualMachineInstancePhase {
		got := &virtv1.VirtualMachineInstance{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(vmi), got))
		return got.Status.Phase
	}
	reconcile(kubelet)
	reconcile(agent)
	for i := 1; i <= 6; i++ { // the agent is gone; the kubelet renews every 20 s
		clk.SetTime(now.Add(time.Duration(i) * 20 * time.Second))
		kubelet.Spec.RenewTime = ptr.To(metav1.NewMicroTime(clk.Now()))
		require.NoError(t, c.Update(ctx, kubelet))
		reconcile(kubelet)
		res := reconcile(agent)
		assert.Equal(t, virtv1.Running, phase(), "after %ds", i*20)
		assert.Positive(t, res.RequeueAfter)
	}
	assert.Contains(t, drain(rec), "the kubelet of node n1 still renews its lease")

	// The kubelet's lease deleted (and not yet made again): judged by when it was last seen.
	require.NoError(t, c.Delete(ctx, kubelet))
	reconcile(kubelet)
	reconcile(agent)
	assert.Equal(t, virtv1.Running, phase(), "a kubelet lease deleted just now")

	// The kubelet stops too: a threshold after its last renewal was seen the node is failed over.
	last := clk.Now()
	clk.SetTime(last.Add(time.Minute))
	reconcile(agent)
	assert.Equal(t, virtv1.Running, phase(), "at the kubelet's threshold")
	clk.SetTime(last.Add(time.Minute + time.Second))
	reconcile(agent)
	assert.Equal(t, virtv1.Failed, phase(), "agent and kubelet stale")
}

// drain is every event recorded so far, joined.
func drain(rec *events.FakeRecorder) string {
	var out string
	for {
		select {
		case e := <-rec.Events:
			out += e + "\n"
		default:
			return out
		}
	}
}

// kubevirt.io/schedulable follows the node's heartbeat: true while it is fresh, false once it is
// stale (before any failover is decided) and once its lease is gone.
func TestSchedulableLabelFollowsTheHeartbeat(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "podvirt", Name: heartbeatv1.LeaseName("n1")},
		Spec: coordinationv1.LeaseSpec{RenewTime: ptr.To(metav1.NewMicroTime(now))}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(lease, node).
		WithIndex(&virtv1.VirtualMachineInstance{}, NodeNameIndex, func(o client.Object) []string {
			return []string{o.(*virtv1.VirtualMachineInstance).Status.NodeName}
		}).Build()
	clk := clocktesting.NewFakePassiveClock(now)
	r := &Reconciler{Client: c, Recorder: events.NewFakeRecorder(10), Namespace: "podvirt", Threshold: time.Minute, Clock: clk}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(lease)}
	label := func() string {
		n := &corev1.Node{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "n1"}, n))
		return n.Labels[SchedulableLabel]
	}

	_, err := r.Reconcile(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, "true", label())
	clk.SetTime(now.Add(time.Minute + time.Second))
	_, err = r.Reconcile(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, "false", label(), "stale")

	clk.SetTime(now)
	r = &Reconciler{Client: c, Recorder: events.NewFakeRecorder(10), Namespace: "podvirt", Threshold: time.Minute, Clock: clk}
	_, err = r.Reconcile(ctx, req)
	require.NoError(t, err)
	require.Equal(t, "true", label(), "fresh again")
	require.NoError(t, c.Delete(ctx, lease))
	_, err = r.Reconcile(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, "false", label(), "lease gone")
}
