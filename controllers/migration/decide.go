package migration

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// action is what one pass does besides writing the migration's phase.
type action int

const (
	actNone action = iota
	// actBegin records the migration in the instance's status.migrationState.
	actBegin
	// actCreateTarget creates the target launcher Pod (scope.render).
	actCreateTarget
	// actRecordTargetNode records the running target Pod's node in the instance's migration state.
	actRecordTargetNode
	// actRequestAbort asks the source's node agent to abort a transfer that may have started.
	actRequestAbort
	// actFailInstance records the failure in the instance's migration state (the source's agent
	// stops waiting for the target); the next pass sees it and fails the migration.
	actFailInstance
	// actRemoveTargets deletes the target Pods of a failed migration (scope.leftovers).
	actRemoveTargets
	// actRelease removes the finalizer of an ended migration.
	actRelease
	// actCollect deletes the instance's ended migrations beyond FinishedToKeep.
	actCollect
)

func (a action) String() string {
	return [...]string{"None", "Begin", "CreateTarget", "RecordTargetNode", "RequestAbort", "FailInstance",
		"RemoveTargets", "Release", "Collect"}[a]
}

// decision is the outcome of decide: the migration's phase after this pass and the one action that
// gets it there.
type decision struct {
	phase  virtv1.VirtualMachineInstanceMigrationPhase
	action action
	// reason and message say why the migration fails (the Event of a new Failed phase, the
	// instance's failureReason, the abort's Event).
	reason, message string
	// retryAfter is set while an unschedulable target Pod has not yet waited UnschedulableTimeout.
	retryAfter time.Duration
}

// decide is the migration's next step from what one pass observed. It is level based: the same
// observation always gives the same decision, whatever the pass before did.
func decide(s *scope) decision {
	m, inst := s.m, s.inst
	phase := m.Status.Phase
	if phase == "" {
		phase = virtv1.MigrationPending
	}
	if phase.IsFinal() {
		return decideEnded(s, phase)
	}
	deleting := m.DeletionTimestamp != nil
	if inst == nil {
		if deleting {
			return failed(ReasonMigrationFailed, whyDeleted)
		}
		return failed(ReasonNotRunning, fmt.Sprintf("spec.vmiName: instance %s does not exist", m.Spec.VMIName))
	}
	ms := inst.Status.MigrationState
	if ms == nil || ms.MigrationUID != string(m.UID) {
		switch {
		case deleting:
			return failed(ReasonMigrationFailed, whyDeleted)
		case phase != virtv1.MigrationPending:
			// Recorded once, now gone: whatever replaced it, this migration can no longer follow it.
			return failed(ReasonMigrationFailed, "the instance's status.migrationState no longer records this migration")
		case ms != nil && !ms.Completed && !ms.Failed:
			return decision{phase: phase} // another migration of the instance runs: wait for it
		case s.earlier != "":
			return decision{phase: phase} // an older migration of the instance goes first
		}
		if why := notMigratable(inst); why != "" {
			return failed(ReasonNotMigratable, why)
		}
		if limit := s.settings.ParallelMigrationsPerCluster; limit > 0 && s.inFlight+s.ahead >= int(limit) {
			return decision{phase: phase, retryAfter: InFlightRetry} // parallelMigrationsPerCluster: wait for a turn, oldest first
		}
		if limit := s.settings.ParallelOutboundMigrationsPerNode; limit > 0 && s.outOfNode+s.aheadOnNode >= int(limit) {
			return decision{phase: phase, retryAfter: InFlightRetry} // parallelOutboundMigrationsPerNode: the same, per source node
		}
		return decision{phase: phase, action: actBegin}
	}
	switch {
	case ms.Completed:
		return decision{phase: virtv1.MigrationSucceeded}
	case ms.Failed:
		return failed(ReasonMigrationFailed, ms.FailureReason)
	}
	if why := problem(s, phase); why != "" {
		return stop(inst, phase, why)
	}
	if s.target == nil {
		return decision{phase: virtv1.MigrationScheduling, action: actCreateTarget}
	}
	return follow(s)
}

// InFlightRetry is how soon a migration held back by parallelMigrationsPerCluster or
// parallelOutboundMigrationsPerNode looks again.
const InFlightRetry = 5 * time.Second

// whyDeleted is the failure of a migration deleted before it ended.
const whyDeleted = "the migration was deleted"

// decideEnded finishes an ended migration: its leftover target Pods go, then its finalizer, then
// the instance's oldest ended migrations.
func decideEnded(s *scope, phase virtv1.VirtualMachineInstanceMigrationPhase) decision {
	switch {
	case phase == virtv1.MigrationFailed && len(s.leftovers) > 0:
		return decision{phase: phase, action: actRemoveTargets}
	case controllerutil.ContainsFinalizer(s.m, virtv1.MigrationFinalizer):
		return decision{phase: phase, action: actRelease}
	case s.m.DeletionTimestamp == nil:
		return decision{phase: phase, action: actCollect}
	}
	return decision{phase: phase}
}

// failed ends the migration as Failed.
func failed(reason, message string) decision {
	return decision{phase: virtv1.MigrationFailed, action: actNone, reason: reason, message: message}
}

// problem says why a migration recorded in its instance's state cannot go on ("" while it can).
func problem(s *scope, phase virtv1.VirtualMachineInstanceMigrationPhase) string {
	inst, ms := s.inst, s.inst.Status.MigrationState
	switch {
	case s.m.DeletionTimestamp != nil:
		return whyDeleted
	case inst.Status.Phase != virtv1.Running || inst.DeletionTimestamp != nil:
		return fmt.Sprintf("the instance stopped running (phase %s)", inst.Status.Phase)
	case s.target == nil && phase != virtv1.MigrationPending:
		return fmt.Sprintf("the target Pod %s was deleted", ms.TargetPod)
	case s.target == nil && s.renderErr != nil:
		return fmt.Sprintf("cannot render the target Pod: %v", s.renderErr)
	case s.target != nil:
		return targetProblem(s.target, ms.TargetNodeAddress != "", s.now)
	}
	return ""
}

// stop ends a migration recorded in its instance's state.
//
// Once the target is ready the source's agent may start the transfer at any moment (it records
// the start only after asking its launcher), and once started only it may end it (the guest may be
// arriving at the target right now): the controller asks for an abort (abortRequested) and the
// agent records the outcome — unless the instance no longer runs at all. Otherwise the failure is
// recorded in the instance's state at once, and the next pass fails the migration.
func stop(inst *virtv1.VirtualMachineInstance, phase virtv1.VirtualMachineInstanceMigrationPhase, why string) decision {
	ms := inst.Status.MigrationState
	mayHaveStarted := ms.TargetNodeAddress != "" || ms.StartTimestamp != nil
	if mayHaveStarted && inst.Status.Phase == virtv1.Running && inst.DeletionTimestamp == nil {
		if ms.AbortRequested {
			return decision{phase: phase} // the source's agent ends it and records how
		}
		return decision{phase: phase, action: actRequestAbort, reason: ReasonMigrationFailed, message: why}
	}
	return decision{phase: phase, action: actFailInstance, reason: ReasonMigrationFailed, message: why}
}

// follow turns the target Pod's and the agents' progress into the migration's phase.
func follow(s *scope) decision {
	ms, pod := s.inst.Status.MigrationState, s.target
	switch {
	case ms.StartTimestamp != nil:
		return decision{phase: virtv1.MigrationRunning}
	case ms.TargetNodeAddress != "":
		return decision{phase: virtv1.MigrationTargetReady}
	}
	// Come back when a target that is not ready has waited long enough to give up.
	readyIn := TargetReadyTimeout - min(max(s.now.Sub(pod.CreationTimestamp.Time), 0), TargetReadyTimeout) + time.Second // bounded: clocks differ
	switch {
	case pod.Status.Phase == corev1.PodRunning:
		d := decision{phase: virtv1.MigrationPreparingTarget, retryAfter: readyIn}
		if ms.TargetNode != pod.Spec.NodeName {
			d.action = actRecordTargetNode
		}
		return d
	case pod.Spec.NodeName != "":
		return decision{phase: virtv1.MigrationScheduled, retryAfter: readyIn}
	}
	// Come back when an unschedulable target has waited long enough to give up.
	waited := min(max(s.now.Sub(pod.CreationTimestamp.Time), 0), UnschedulableTimeout) // bounded: clocks differ
	return decision{phase: virtv1.MigrationScheduling, retryAfter: UnschedulableTimeout - waited + time.Second}
}

// notMigratable says why the instance cannot be migrated now ("" when it can).
func notMigratable(inst *virtv1.VirtualMachineInstance) string {
	if inst.Status.Phase != virtv1.Running || inst.Status.NodeName == "" || inst.DeletionTimestamp != nil {
		return fmt.Sprintf("instance %s is not running (phase %q)", inst.Name, inst.Status.Phase)
	}
	if c := meta.FindStatusCondition(inst.Status.Conditions, virtv1.VirtualMachineInstanceLiveMigratable); c != nil && c.Status == metav1.ConditionFalse {
		return fmt.Sprintf("instance %s is not live-migratable: %s", inst.Name, c.Message)
	}
	return ""
}

// targetProblem says why the target Pod cannot receive the guest ("" while it can).
func targetProblem(pod *corev1.Pod, ready bool, now time.Time) string {
	switch {
	case pod.DeletionTimestamp != nil:
		return fmt.Sprintf("the target Pod %s is being deleted", pod.Name)
	case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
		return fmt.Sprintf("the target Pod %s ended (%s)", pod.Name, pod.Status.Phase)
	case !ready && now.Sub(pod.CreationTimestamp.Time) > TargetReadyTimeout:
		return fmt.Sprintf("the target Pod %s was not ready to receive the guest within %s (Pod phase %s)", pod.Name, TargetReadyTimeout, pod.Status.Phase)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
			now.Sub(pod.CreationTimestamp.Time) > UnschedulableTimeout {
			return fmt.Sprintf("the target Pod %s could not be scheduled within %s: %s", pod.Name, UnschedulableTimeout, c.Message)
		}
	}
	return ""
}
