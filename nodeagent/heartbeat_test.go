package nodeagent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	"github.com/podvirt/podvirt/internal/scheme"
)

// The agent vouches for its launchers only while its own heartbeat is fresh, so that a launcher
// on a node cut off from the control plane fences its guest before the controllers (80 s) start
// the VM elsewhere.
func TestHeartbeatFreshness(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	peer := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "podvirt", Name: heartbeatv1.LeaseName("n2")}}
	h := &Heartbeat{Client: fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(peer).Build(), Namespace: "podvirt", NodeName: "n1", Holder: "agent", Interval: heartbeatv1.RenewInterval, Clock: clk}
	assert.False(t, h.Vouching(), "fresh before the first renewal")
	_, until := h.Vouch()
	assert.Zero(t, until)
	renewed := clk.Now()
	require.NoError(t, h.renew(context.Background()))
	assert.True(t, h.Vouching())
	vouching, until := h.Vouch()
	assert.True(t, vouching)
	assert.Equal(t, renewed.Add(heartbeatv1.VouchLimit), until, "what launchers clamp a request's hearing to")
	clk.SetTime(clk.Now().Add(heartbeatv1.VouchLimit))
	assert.True(t, h.Vouching(), "fresh at the limit")
	clk.SetTime(clk.Now().Add(time.Second))
	assert.False(t, h.Vouching(), "fresh past the limit")
	_, until = h.Vouch()
	assert.Zero(t, until)
	// The order the fencing relies on: vouching stops, the launcher's limit passes, and only then
	// does the controllers' default threshold (2×LeaseDuration) fail the instance.
	assert.Greater(t, heartbeatv1.MinThreshold, heartbeatv1.VouchLimit+launcherv1.AgentSilenceLimit)
	assert.GreaterOrEqual(t, 2*heartbeatv1.LeaseDuration, heartbeatv1.MinThreshold, "virt-controller's default threshold")
}

// Through an outage the agent vouches on its peers' word: for ConfirmValidity after asking a peer
// that is cut off too. Its answers to peers are marked on its lease by its next renewal (and its
// first renewal after a start marks too); an agent that listed no peer vouches alone, and says so.
func TestHeartbeatVouchesOnPeersWord(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakePassiveClock(time.Now())
	peer := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "podvirt", Name: heartbeatv1.LeaseName("n2"),
		Annotations: map[string]string{heartbeatv1.AnnotationAddress: "10.0.0.2:8186"}}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(peer).Build()
	h := &Heartbeat{Client: c, Namespace: "podvirt", NodeName: "n1", Holder: "agent", Interval: heartbeatv1.RenewInterval, Clock: clk, Address: "10.0.0.1:8186"}
	own := func() *coordinationv1.Lease {
		l := &coordinationv1.Lease{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "podvirt", Name: heartbeatv1.LeaseName("n1")}, l))
		return l
	}
	assert.False(t, h.AnswerPeer().CutOff, "not renewed since the start: it knows nothing of its own lapse")
	require.NoError(t, h.renew(ctx))
	assert.Equal(t, map[string]string{heartbeatv1.AnnotationAddress: "10.0.0.1:8186", heartbeatv1.AnnotationConfirmed: "1"}, own().Annotations, "renewed first, listed after")
	assert.False(t, h.listed)
	assert.False(t, h.AnswerPeer().CutOff, "just renewed")
	require.NoError(t, h.renew(ctx))
	assert.Equal(t, map[string]string{heartbeatv1.AnnotationPeers: "1", heartbeatv1.AnnotationAddress: "10.0.0.1:8186", heartbeatv1.AnnotationConfirmed: "1"}, own().Annotations, "the list written, nothing to mark")
	assert.Equal(t, []Peer{{Node: "n2", Address: "10.0.0.2:8186"}}, h.peers)

	last := clk.Now()
	clk.SetTime(last.Add(heartbeatv1.AnswerAfter))
	assert.False(t, h.AnswerPeer().CutOff, "at AnswerAfter")
	assert.False(t, h.Vouching(), "stale, no peer asked")
	clk.SetTime(last.Add(heartbeatv1.AnswerAfter + time.Second))
	assert.True(t, h.AnswerPeer().CutOff, "past AnswerAfter")

	asked := clk.Now()
	var questions []Peer
	h.Ask = func(_ context.Context, p Peer) (bool, error) { questions = append(questions, p); return true, nil }
	by, said := h.ask(ctx, h.peers)
	assert.Equal(t, []string{"n2"}, by)
	assert.Equal(t, "n2: cut off too", said)
	h.confirmed = asked
	assert.True(t, h.Vouching(), "a peer is cut off too")
	clk.SetTime(asked.Add(heartbeatv1.ConfirmValidity))
	assert.True(t, h.Vouching(), "at the confirmation's end")
	clk.SetTime(asked.Add(heartbeatv1.ConfirmValidity + time.Millisecond))
	assert.False(t, h.Vouching(), "the confirmation has expired")
	h.Ask = func(context.Context, Peer) (bool, error) { return false, errors.New("no route") }
	by, said = h.ask(ctx, h.peers)
	assert.Empty(t, by)
	assert.Equal(t, "n2: unreachable", said)

	require.NoError(t, h.renew(ctx))
	assert.Equal(t, "2", own().Annotations[heartbeatv1.AnnotationConfirmed], "the answer given during the lapse is marked")
	require.NoError(t, h.renew(ctx))
	assert.Equal(t, "2", own().Annotations[heartbeatv1.AnnotationConfirmed], "a renewal in time marks nothing")
	clk.SetTime(clk.Now().Add(heartbeatv1.MarkAfter + time.Second))
	require.NoError(t, h.renew(ctx))
	assert.Equal(t, "3", own().Annotations[heartbeatv1.AnnotationConfirmed], "a renewal that started past MarkAfter marks: it may have answered in flight")

	// Past MaxLapse it neither answers "cut off" nor vouches on its peers' word.
	clk.SetTime(clk.Now().Add(heartbeatv1.MaxLapse + time.Second))
	assert.False(t, h.AnswerPeer().CutOff, "lapsed past MaxLapse")
	h.confirmed = clk.Now()
	assert.False(t, h.Vouching(), "a confirmation past MaxLapse")

	// The peer's lease is gone: the next list finds none, the lease says 0 and the agent vouches
	// alone, through any outage.
	require.NoError(t, c.Delete(ctx, peer))
	for range listEvery + 1 {
		require.NoError(t, h.renew(ctx))
	}
	assert.Equal(t, "0", own().Annotations[heartbeatv1.AnnotationPeers])
	clk.SetTime(clk.Now().Add(time.Hour))
	assert.True(t, h.Vouching(), "no peer to fail it over to, none to ask")
}
