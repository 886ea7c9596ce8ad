package migration

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// progress is how far the node agents got, as recorded in the instance's migration state.
type progress int

const (
	notBegun        progress = iota // the instance's state does not name this migration
	begun                           // recorded, nothing else yet
	targetNodeKnown                 // targetNode recorded
	targetReady                     // targetNodeAddress recorded
	started                         // startTimestamp recorded
	completed
	failedState
)

func (p progress) String() string {
	return [...]string{"notBegun", "begun", "targetNodeKnown", "targetReady", "started", "completed", "failed"}[p]
}

// targets are the states of the target Pod a pass can observe.
var targets = map[string]*corev1.Pod{
	"absent":        nil,
	"pending":       targetPod(corev1.PodPending, "", 0),
	"unschedulable": withUnschedulable(targetPod(corev1.PodPending, "", UnschedulableTimeout+time.Minute)),
	"young-unsched": withUnschedulable(targetPod(corev1.PodPending, "", time.Minute)),
	"stuck-bound":   targetPod(corev1.PodPending, "node-b", TargetReadyTimeout+time.Minute),
	"stuck-running": targetPod(corev1.PodRunning, "node-b", TargetReadyTimeout+time.Minute),
	"bound":         targetPod(corev1.PodPending, "node-b", 0),
	"running":       targetPod(corev1.PodRunning, "node-b", 0),
	"failed":        targetPod(corev1.PodFailed, "node-b", 0),
	"succeeded":     targetPod(corev1.PodSucceeded, "node-b", 0),
	"deleting":      deletingPod(targetPod(corev1.PodRunning, "node-b", 0)),
}

func targetPod(phase corev1.PodPhase, node string, age time.Duration) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "target", CreationTimestamp: metav1.NewTime(t0.Add(-age))},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

func withUnschedulable(p *corev1.Pod) *corev1.Pod {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/2 nodes"}}
	return p
}

func deletingPod(p *corev1.Pod) *corev1.Pod {
	now := metav1.NewTime(t0)
	p.DeletionTimestamp = &now
	return p
}

// observation builds a scope: a migration in phase, its running instance with the agents'
// progress, the target Pod as observed, an abort already requested or not.
type observation struct {
	phase     virtv1.VirtualMachineInstanceMigrationPhase
	progress  progress
	target    string
	abort     bool
	deleted   bool // the migration is being deleted
	instPhase virtv1.VirtualMachineInstancePhase
	noInst    bool
	renderErr bool
	leftovers int
	finalizer bool
	earlier   bool // an older unfinished migration of the instance exists
}

func (o observation) scope() *scope {
	m := &virtv1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{Name: "mig", UID: "m-uid"},
		Spec:       virtv1.VirtualMachineInstanceMigrationSpec{VMIName: "vm"},
		Status:     virtv1.VirtualMachineInstanceMigrationStatus{Phase: o.phase},
	}
	if o.deleted {
		now := metav1.NewTime(t0)
		m.DeletionTimestamp = &now
	}
	if o.finalizer {
		m.Finalizers = []string{virtv1.MigrationFinalizer}
	}
	s := &scope{m: m, now: t0, target: targets[o.target]}
	if o.earlier {
		s.earlier = "older"
	}
	for range o.leftovers {
		s.leftovers = append(s.leftovers, targetPod(corev1.PodRunning, "node-b", 0))
	}
	if o.noInst {
		return s
	}
	phase := o.instPhase
	if phase == "" {
		phase = virtv1.Running
	}
	s.inst = &virtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "vm"},
		Status:     virtv1.VirtualMachineInstanceStatus{Phase: phase, NodeName: "node-a", LauncherPod: "source"},
	}
	if o.progress == notBegun {
		return s
	}
	ms := &virtv1.VirtualMachineInstanceMigrationState{MigrationUID: "m-uid", SourceNode: "node-a", SourcePod: "source", TargetPod: "target", AbortRequested: o.abort}
	ts := metav1.NewTime(t0)
	switch o.progress {
	case failedState:
		ms.Failed, ms.FailureReason = true, "the guest did not arrive"
	case completed:
		ms.Completed, ms.TargetNode = true, "node-b"
	case started:
		ms.StartTimestamp = &ts
		fallthrough
	case targetReady:
		ms.TargetNodeAddress = "10.0.0.2"
		fallthrough
	case targetNodeKnown:
		ms.TargetNode = "node-b"
	}
	s.inst.Status.MigrationState = ms
	if o.target == "absent" && (o.phase == "" || o.phase == virtv1.MigrationPending) {
		if o.renderErr {
			s.renderErr = errors.New("bad spec")
		} else {
			s.render = targetPod(corev1.PodPending, "", 0)
		}
	}
	return s
}

func TestDecide(t *testing.T) {
	const (
		pending   = virtv1.MigrationPending
		sched     = virtv1.MigrationScheduling
		scheduled = virtv1.MigrationScheduled
		preparing = virtv1.MigrationPreparingTarget
		ready     = virtv1.MigrationTargetReady
		running   = virtv1.MigrationRunning
		succeeded = virtv1.MigrationSucceeded
		failed    = virtv1.MigrationFailed
	)
	cases := []struct {
		name   string
		obs    observation
		phase  virtv1.VirtualMachineInstanceMigrationPhase
		action action
		reason string
	}{
		// Starting.
		{"new migration begins", observation{phase: "", target: "absent"}, pending, actBegin, ""},
		{"no instance", observation{phase: pending, noInst: true, target: "absent"}, failed, actNone, ReasonNotRunning},
		{"instance not running", observation{phase: pending, instPhase: virtv1.Scheduled, target: "absent"}, failed, actNone, ReasonNotMigratable},
		{"an older migration goes first", observation{phase: pending, target: "absent", earlier: true}, pending, actNone, ""},
		{"record replaced after it began", observation{phase: sched, target: "pending"}, failed, actNone, ReasonMigrationFailed},
		{"begun: target created", observation{phase: pending, progress: begun, target: "absent"}, sched, actCreateTarget, ""},
		{"begun: target cannot render", observation{phase: pending, progress: begun, target: "absent", renderErr: true}, pending, actFailInstance, ReasonMigrationFailed},
		// Following the target Pod.
		{"target pending", observation{phase: sched, progress: begun, target: "pending"}, sched, actNone, ""},
		{"target young unschedulable", observation{phase: sched, progress: begun, target: "young-unsched"}, sched, actNone, ""},
		{"target unschedulable too long", observation{phase: sched, progress: begun, target: "unschedulable"}, sched, actFailInstance, ReasonMigrationFailed},
		{"target bound", observation{phase: sched, progress: begun, target: "bound"}, scheduled, actNone, ""},
		{"target bound, never running past the ready timeout", observation{phase: scheduled, progress: begun, target: "stuck-bound"}, scheduled, actFailInstance, ReasonMigrationFailed},
		{"target running, never ready past the ready timeout", observation{phase: preparing, progress: targetNodeKnown, target: "stuck-running"}, preparing, actFailInstance, ReasonMigrationFailed},
		{"an old target once ready is not timed out", observation{phase: ready, progress: targetReady, target: "stuck-running"}, ready, actNone, ""},
		{"target running: node recorded", observation{phase: scheduled, progress: begun, target: "running"}, preparing, actRecordTargetNode, ""},
		{"target running, node known", observation{phase: preparing, progress: targetNodeKnown, target: "running"}, preparing, actNone, ""},
		{"target ready", observation{phase: preparing, progress: targetReady, target: "running"}, ready, actNone, ""},
		{"transfer started", observation{phase: ready, progress: started, target: "running"}, running, actNone, ""},
		{"completed", observation{phase: running, progress: completed, target: "running"}, succeeded, actNone, ""},
		{"agent recorded failure", observation{phase: running, progress: failedState, target: "running"}, failed, actNone, ReasonMigrationFailed},
		// Target trouble before and after the transfer may have started.
		{"target deleted before ready", observation{phase: sched, progress: begun, target: "absent"}, sched, actFailInstance, ReasonMigrationFailed},
		{"target failed before ready", observation{phase: scheduled, progress: begun, target: "failed"}, scheduled, actFailInstance, ReasonMigrationFailed},
		{"target ended before ready", observation{phase: preparing, progress: targetNodeKnown, target: "succeeded"}, preparing, actFailInstance, ReasonMigrationFailed},
		{"target deleting once ready: abort", observation{phase: ready, progress: targetReady, target: "deleting"}, ready, actRequestAbort, ReasonMigrationFailed},
		{"target failed while running: abort", observation{phase: running, progress: started, target: "failed"}, running, actRequestAbort, ReasonMigrationFailed},
		{"abort already requested: wait", observation{phase: running, progress: started, target: "failed", abort: true}, running, actNone, ""},
		{"instance stopped mid-transfer", observation{phase: running, progress: started, target: "running", instPhase: virtv1.Failed}, running, actFailInstance, ReasonMigrationFailed},
		// Deleting the migration.
		{"deleted before begun", observation{phase: pending, deleted: true, target: "absent"}, failed, actNone, ReasonMigrationFailed},
		{"deleted, no instance", observation{phase: sched, deleted: true, noInst: true, target: "absent"}, failed, actNone, ReasonMigrationFailed},
		{"deleted while scheduling", observation{phase: sched, progress: begun, deleted: true, target: "pending"}, sched, actFailInstance, ReasonMigrationFailed},
		{"deleted while running: abort", observation{phase: running, progress: started, deleted: true, target: "running"}, running, actRequestAbort, ReasonMigrationFailed},
		{"deleted, abort requested: wait", observation{phase: running, progress: started, deleted: true, abort: true, target: "running"}, running, actNone, ""},
		{"deleted after completion", observation{phase: running, progress: completed, deleted: true, target: "running"}, succeeded, actNone, ""},
		// Ended.
		{"failed with leftovers", observation{phase: failed, progress: failedState, leftovers: 1, finalizer: true}, failed, actRemoveTargets, ""},
		{"failed, no leftovers", observation{phase: failed, progress: failedState, finalizer: true}, failed, actRelease, ""},
		{"succeeded, released", observation{phase: succeeded, progress: completed}, succeeded, actCollect, ""},
		{"deleted, released", observation{phase: failed, progress: failedState, deleted: true}, failed, actNone, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := decide(c.obs.scope())
			assert.Equal(t, c.phase, d.phase, "phase")
			assert.Equal(t, c.action.String(), d.action.String(), "action")
			assert.Equal(t, c.reason, d.reason, "reason")
			if d.reason != "" {
				assert.NotEmpty(t, d.message, "a failure says why")
			}
		})
	}
}

func TestDecideWaitsForAnotherMigration(t *testing.T) {
	s := observation{phase: pending, target: "absent"}.scope()
	s.inst.Status.MigrationState = &virtv1.VirtualMachineInstanceMigrationState{MigrationUID: "other"}
	assert.Equal(t, decision{phase: pending}, decide(s))
	s.inst.Status.MigrationState.Completed = true
	assert.Equal(t, actBegin, decide(s).action, "the other one ended")
}

// parallelMigrationsPerCluster holds a migration back while that many others are in flight or
// older ones wait for the places left; zero (no cap) does not.
func TestDecideParallelMigrationsPerCluster(t *testing.T) {
	for _, tc := range []struct {
		limit           uint32
		inFlight, ahead int
		begins          bool
	}{{0, 10, 3, true}, {2, 1, 0, true}, {2, 2, 0, false}, {2, 3, 0, false}, {2, 1, 1, false}, {2, 0, 1, true}} {
		s := observation{phase: pending, target: "absent"}.scope()
		s.settings.ParallelMigrationsPerCluster, s.inFlight, s.ahead = tc.limit, tc.inFlight, tc.ahead
		d := decide(s)
		if tc.begins {
			assert.Equal(t, actBegin, d.action, "%+v", tc)
			continue
		}
		assert.Equal(t, decision{phase: pending, retryAfter: InFlightRetry}, d, "%+v", tc)
	}
}

// parallelOutboundMigrationsPerNode holds a migration back while that many others out of its node
// are in flight or older ones out of it wait; zero (no cap) does not.
func TestDecideParallelOutboundMigrationsPerNode(t *testing.T) {
	for _, tc := range []struct {
		limit                  uint32
		outOfNode, aheadOnNode int
		begins                 bool
	}{{0, 10, 3, true}, {2, 1, 0, true}, {2, 2, 0, false}, {2, 1, 1, false}, {2, 0, 1, true}, {1, 0, 1, false}} {
		s := observation{phase: pending, target: "absent"}.scope()
		s.settings.ParallelOutboundMigrationsPerNode, s.outOfNode, s.aheadOnNode = tc.limit, tc.outOfNode, tc.aheadOnNode
		s.inFlight, s.ahead = tc.outOfNode, tc.aheadOnNode // counted in the cluster too; its cap (none here) is the other test's
		d := decide(s)
		if tc.begins {
			assert.Equal(t, actBegin, d.action, "%+v", tc)
			continue
		}
		assert.Equal(t, decision{phase: pending, retryAfter: InFlightRetry}, d, "%+v", tc)
	}
}

const pending = virtv1.MigrationPending

// TestDecideInvariants walks every phase × agent progress × target Pod state × abort request ×
// deletion and checks the rules no row may break.
func TestDecideInvariants(t *testing.T) {
	phases := []virtv1.VirtualMachineInstanceMigrationPhase{"", pending, virtv1.MigrationScheduling, virtv1.MigrationScheduled,
		virtv1.MigrationPreparingTarget, virtv1.MigrationTargetReady, virtv1.MigrationRunning, virtv1.MigrationSucceeded, virtv1.MigrationFailed}
	for _, phase := range phases {
		for p := notBegun; p <= failedState; p++ {
			for target := range targets {
				for _, abort := range []bool{false, true} {
					for _, deleted := range []bool{false, true} {
						o := observation{phase: phase, progress: p, target: target, abort: abort, deleted: deleted, finalizer: true}
						name := fmt.Sprintf("%s/%s/%s/abort=%v/deleted=%v", phase, p, target, abort, deleted)
						checkInvariants(t, name, o, decide(o.scope()))
					}
				}
			}
		}
	}
}

func checkInvariants(t *testing.T, name string, o observation, d decision) {
	t.Helper()
	ended := o.phase.IsFinal()
	if ended && d.phase != o.phase {
		t.Errorf("%s: an ended migration changed phase to %s", name, d.phase)
	}
	if !ended && d.phase == virtv1.MigrationPending && o.phase != "" && o.phase != pending {
		t.Errorf("%s: went back to Pending", name)
	}
	mayHaveStarted := o.progress == targetReady || o.progress == started
	if !ended && mayHaveStarted && d.action == actFailInstance {
		t.Errorf("%s: failed the instance's state of a transfer only the source's agent may end", name)
	}
	if o.abort && d.action == actRequestAbort {
		t.Errorf("%s: asked twice for an abort", name)
	}
	if d.action == actCreateTarget && (o.target != "absent" || o.deleted || (o.phase != "" && o.phase != pending)) {
		t.Errorf("%s: created a target Pod", name)
	}
	if o.deleted && !ended && (d.action == actBegin || d.action == actRecordTargetNode) {
		t.Errorf("%s: a deleted migration went on (%s)", name, d.action)
	}
	if !ended && d.phase == virtv1.MigrationSucceeded && o.progress != completed {
		t.Errorf("%s: succeeded without the agents' word", name)
	}
	if d.phase == virtv1.MigrationFailed && !ended && o.progress != notBegun && o.progress != failedState && o.progress != completed {
		t.Errorf("%s: failed while the instance's state still names it unfinished", name)
	}
}
