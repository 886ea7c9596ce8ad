package vm

import (
	"hash/fnv"
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// action is what one reconcile does to the instance.
type action int

const (
	actNone action = iota
	// actCreate creates a new instance.
	actCreate
	// actDelete deletes the current instance (stop, or make way for a restart).
	actDelete
)

func (a action) String() string {
	return [...]string{"None", "Create", "Delete"}[a]
}

// decision is the outcome of decide: an action, which state-change request it completes, and
// when to look again if the controller has to wait for time to pass.
type decision struct {
	action action
	// dropRequest removes the first state-change request, which this decision completes.
	dropRequest bool
	// retryAfter is set while start is held back by the crash-loop backoff.
	retryAfter time.Duration
	// stoppedReason explains, for the Stopped condition, why no instance is wanted.
	stoppedReason string
	// queueStart records a Start request, which then replaces the failed instance: the request
	// path deletes it and creates the next one even though the run strategy alone would not start
	// it once the old one is gone (RerunOnFailure).
	queueStart bool
	// waitingForClaims is set when an instance is wanted but its claims do not exist yet.
	waitingForClaims bool
}

// observed is what decide needs to know about the current instance (nil fields mean no instance).
type observed struct {
	exists   bool
	uid      types.UID
	phase    virtv1.VirtualMachineInstancePhase
	deleting bool
}

func observe(vmi *virtv1.VirtualMachineInstance) observed {
	if vmi == nil {
		return observed{}
	}
	return observed{exists: true, uid: vmi.UID, phase: vmi.Status.Phase, deleting: vmi.DeletionTimestamp != nil}
}

// decide applies the run strategy table and the first pending state-change request. It is level
// based: the same observation always gives the same decision.
func decide(vm *virtv1.VirtualMachine, cur observed, now time.Time) decision {
	strategy := vm.Spec.EffectiveRunStrategy()
	var req *virtv1.VirtualMachineStateChangeRequest
	if len(vm.Status.StateChangeRequests) > 0 {
		req = &vm.Status.StateChangeRequests[0]
	}

	// The first request is acted on before the strategy, as KubeVirt does.
	if req != nil && strategy != virtv1.RunStrategyHalted {
		switch req.Action {
		case virtv1.StopRequest:
			if cur.exists && (req.UID == nil || *req.UID == cur.uid) {
				if cur.deleting {
					return decision{action: actNone, stoppedReason: "StopRequested"}
				}
				return decision{action: actDelete, stoppedReason: "StopRequested"}
			}
			// The instance the request was meant for is gone: the request is done.
			return decision{dropRequest: true, stoppedReason: "StopRequested"}
		case virtv1.StartRequest:
			if cur.exists && !cur.deleting && !cur.phase.IsFinal() {
				return decision{dropRequest: true}
			}
			if cur.exists {
				if cur.phase.IsFinal() && !cur.deleting {
					return decision{action: actDelete} // make way for the new instance (fencing)
				}
				return decision{} // wait until the old instance is gone
			}
			if d, held := backoff(vm, now); held {
				return d
			}
			return decision{action: actCreate}
		}
	}

	switch strategy {
	case virtv1.RunStrategyHalted:
		d := decision{stoppedReason: "Halted", dropRequest: req != nil}
		if cur.exists && !cur.deleting {
			d.action, d.dropRequest = actDelete, false
		}
		return d
	case virtv1.RunStrategyAlways:
		return keepRunning(vm, cur, now, func(virtv1.VirtualMachineInstancePhase) bool { return true })
	case virtv1.RunStrategyRerunOnFailure:
		if !cur.exists && vm.Status.RunStrategy == strategy {
			// The instance went away after a stop or a guest shutdown: stay off until asked.
			return decision{stoppedReason: "Stopped"}
		}
		d := keepRunning(vm, cur, now, func(p virtv1.VirtualMachineInstancePhase) bool { return p == virtv1.Failed })
		if d.action == actDelete {
			// Record the rerun first (a Start request, written with the optimistic lock) and leave
			// the deletion to the request: deleting now and losing the status write would leave the
			// instance gone with nothing saying it is to run again.
			return decision{queueStart: true}
		}
		return d
	case virtv1.RunStrategyOnce:
		if cur.exists {
			if cur.phase.IsFinal() {
				return decision{stoppedReason: "RanOnce"}
			}
			return decision{}
		}
		if vm.Status.RunStrategy == strategy {
			return decision{stoppedReason: "RanOnce"}
		}
		return decision{action: actCreate}
	case virtv1.RunStrategyManual:
		if !cur.exists || cur.phase.IsFinal() {
			return decision{stoppedReason: "Manual"}
		}
	}
	return decision{}
}

// keepRunning creates an instance when there is none and replaces a final one when rerun says so.
func keepRunning(vm *virtv1.VirtualMachine, cur observed, now time.Time, rerun func(virtv1.VirtualMachineInstancePhase) bool) decision {
	switch {
	case cur.exists && cur.deleting:
		return decision{} // fencing: never a new instance while the old one exists
	case cur.exists && cur.phase.IsFinal():
		if !rerun(cur.phase) {
			return decision{stoppedReason: launcherv1.ReasonGuestShutdown}
		}
		if _, held := backoff(vm, now); held {
			return decision{retryAfter: retryIn(vm, now), stoppedReason: "CrashLoopBackOff"}
		}
		return decision{action: actDelete}
	case cur.exists:
		return decision{}
	}
	if d, held := backoff(vm, now); held {
		return d
	}
	return decision{action: actCreate}
}

// backoff reports whether a start is held back by the crash-loop backoff.
func backoff(vm *virtv1.VirtualMachine, now time.Time) (decision, bool) {
	if d := retryIn(vm, now); d > 0 {
		return decision{retryAfter: d, stoppedReason: "CrashLoopBackOff"}, true
	}
	return decision{}, false
}

func retryIn(vm *virtv1.VirtualMachine, now time.Time) time.Duration {
	sf := vm.Status.StartFailure
	if sf == nil || sf.RetryAfterTimestamp == nil {
		return 0
	}
	return sf.RetryAfterTimestamp.Sub(now)
}

// Crash-loop backoff parameters: the delay after the n-th consecutive start failure is
// backoffBase·n², plus up to backoffJitter of itself, capped at backoffCap.
const (
	backoffBase   = 10 * time.Second
	backoffCap    = 300 * time.Second
	backoffJitter = 0.2
)

// backoffDelay is the delay after failures consecutive start failures. The jitter is derived from
// the VirtualMachine's UID and the count, so it spreads VMs apart yet is reproducible.
func backoffDelay(vmUID types.UID, failures int) time.Duration {
	if failures <= 0 {
		return 0
	}
	base := float64(backoffBase) * math.Pow(float64(failures), 2)
	h := fnv.New32a()
	_, _ = h.Write([]byte(vmUID))
	_, _ = h.Write([]byte{byte(failures)})
	jitter := float64(h.Sum32()%1000) / 1000 * backoffJitter
	d := time.Duration(base * (1 + jitter))
	return min(d, backoffCap)
}

// recordStartFailure updates status.startFailure after observing the instance's final state: a
// failure before ever running counts; an instance that reached Running resets the count.
func recordStartFailure(vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance, now time.Time) {
	if vmi == nil {
		return
	}
	if reachedRunning(vmi) {
		vm.Status.StartFailure = nil
		return
	}
	if vmi.Status.Phase != virtv1.Failed || vmi.DeletionTimestamp != nil {
		// A stopped (deleted) instance did not fail to start, however its launcher ended.
		return
	}
	sf := vm.Status.StartFailure
	if sf != nil && sf.LastFailedVMIUID == vmi.UID {
		return // already counted
	}
	count := 1
	if sf != nil {
		count = sf.ConsecutiveFailCount + 1
	}
	retry := metav1.NewTime(now.Add(backoffDelay(vm.UID, count)))
	vm.Status.StartFailure = &virtv1.VirtualMachineStartFailure{
		LastFailedVMIUID:     vmi.UID,
		RetryAfterTimestamp:  &retry,
		ConsecutiveFailCount: count,
	}
}

func reachedRunning(vmi *virtv1.VirtualMachineInstance) bool {
	if vmi.Status.Phase == virtv1.Running {
		return true
	}
	for _, t := range vmi.Status.PhaseTransitionTimestamps {
		if t.Phase == virtv1.Running {
			return true
		}
	}
	return false
}
