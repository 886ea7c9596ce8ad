package replicaset

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// vmi is an instance in phase, Ready or not, created age before t0.
func vmi(name string, phase virtv1.VirtualMachineInstancePhase, ready bool, age time.Duration) *virtv1.VirtualMachineInstance {
	v := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-age))},
		Status: virtv1.VirtualMachineInstanceStatus{Phase: phase}}
	if ready {
		v.Status.Conditions = []metav1.Condition{{Type: virtv1.VirtualMachineInstanceReady, Status: metav1.ConditionTrue}}
	}
	return v
}

func names(vs []*virtv1.VirtualMachineInstance) []string {
	out := []string{}
	for _, v := range vs {
		out = append(out, v.Name)
	}
	return out
}

func TestSetStatus(t *testing.T) {
	deleting := vmi("deleting", virtv1.Running, true, time.Hour)
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	for _, tc := range []struct {
		name          string
		paused        bool
		owned         []*virtv1.VirtualMachineInstance
		active        []string
		replicas, rdy int32
	}{
		{"none", false, nil, []string{}, 0, 0},
		{"ready and not", false, []*virtv1.VirtualMachineInstance{vmi("a", virtv1.Running, true, 0), vmi("b", virtv1.Scheduling, false, 0)}, []string{"a", "b"}, 2, 1},
		{"final and deleting do not count", false, []*virtv1.VirtualMachineInstance{vmi("a", virtv1.Running, true, 0), vmi("done", virtv1.Succeeded, false, 0), vmi("bad", virtv1.Failed, false, 0), deleting}, []string{"a"}, 1, 1},
		{"paused", true, []*virtv1.VirtualMachineInstance{vmi("a", virtv1.Running, false, 0)}, []string{"a"}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := &virtv1.VirtualMachineInstanceReplicaSet{Spec: virtv1.VirtualMachineInstanceReplicaSetSpec{Paused: tc.paused}}
			active := setStatus(rs, tc.owned)
			assert.Equal(t, tc.active, names(active))
			assert.Equal(t, tc.replicas, rs.Status.Replicas)
			assert.Equal(t, tc.rdy, rs.Status.ReadyReplicas)
			assert.Equal(t, tc.paused, len(rs.Status.Conditions) == 1 && rs.Status.Conditions[0].Type == virtv1.VirtualMachineInstanceReplicaSetPaused)
		})
	}
	rs := &virtv1.VirtualMachineInstanceReplicaSet{Spec: virtv1.VirtualMachineInstanceReplicaSetSpec{Paused: true}}
	setStatus(rs, nil)
	rs.Spec.Paused = false
	setStatus(rs, nil)
	assert.Empty(t, rs.Status.Conditions, "unpausing removes the condition")
}

// Scaling down loses the cheapest instances first: not running, then not ready, newest first.
func TestPickVictims(t *testing.T) {
	active := []*virtv1.VirtualMachineInstance{
		vmi("old-ready", virtv1.Running, true, 3*time.Hour),
		vmi("new-ready", virtv1.Running, true, time.Hour),
		vmi("running-not-ready", virtv1.Running, false, 2*time.Hour),
		vmi("old-scheduling", virtv1.Scheduling, false, 2*time.Hour),
		vmi("new-pending", virtv1.Pending, false, time.Minute),
	}
	for n, want := range map[int][]string{
		0: {},
		1: {"new-pending"},
		3: {"new-pending", "old-scheduling", "running-not-ready"},
		4: {"new-pending", "old-scheduling", "running-not-ready", "new-ready"},
		9: {"new-pending", "old-scheduling", "running-not-ready", "new-ready", "old-ready"},
	} {
		assert.Equal(t, want, names(pickVictims(active, n)), "n=%d", n)
	}
	assert.Equal(t, "old-ready", active[0].Name, "the caller's slice is not reordered")
}

func TestExpectations(t *testing.T) {
	rs := types.NamespacedName{Namespace: "ns", Name: "rs"}
	e := newExpectations()
	seen := map[string]bool{"gone": true}
	present := func(n string) bool { return seen[n] }
	assert.True(t, e.satisfied(rs, present, t0), "nothing expected")
	e.expect(rs, []string{"new"}, []string{"gone"}, t0)
	assert.False(t, e.satisfied(rs, present, t0), "the cache shows neither write")
	seen["new"] = true
	assert.False(t, e.satisfied(rs, present, t0), "the deletion not yet")
	delete(seen, "gone")
	assert.True(t, e.satisfied(rs, present, t0), "both writes seen")
	assert.True(t, e.satisfied(rs, func(string) bool { return false }, t0), "and forgotten once satisfied")

	e.expect(rs, []string{"never"}, nil, t0)
	assert.False(t, e.satisfied(rs, present, t0.Add(expectationTTL)))
	assert.True(t, e.satisfied(rs, present, t0.Add(expectationTTL+time.Second)), "a write the cache never shows is given up after the TTL")

	e.expect(rs, []string{"x"}, nil, t0)
	e.forget(rs)
	assert.True(t, e.satisfied(rs, present, t0), "a deleted replica set expects nothing")
	e.expect(rs, nil, nil, t0)
	assert.True(t, e.satisfied(rs, present, t0), "a pass that wrote nothing expects nothing")
}
