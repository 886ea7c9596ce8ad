// Package lifecycle decides what the start, stop and restart subresources of a VirtualMachine do,
// with KubeVirt's semantics, as pure functions of the VM and its instance: either a JSON patch
// (RFC 6902) of the VM's spec (runStrategy Always/Halted, or the deprecated running) or of its status
// (state-change requests for the Manual and RerunOnFailure strategies, and for restarts), or a
// Conflict naming why the call does not apply now. Every patch starts with a `test` op on the value
// it was computed from, so a call racing another change fails instead of overwriting it.
package lifecycle

import (
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// Op is one JSON patch operation. Value is always sent (a test of null must say null).
type Op struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// Patch is what a call does to the VirtualMachine: JSON patch ops for its spec, or for its status
// subresource when Status is set.
type Patch struct {
	Status bool
	Ops    []Op
}

// JSON is the patch body.
func (p Patch) JSON() ([]byte, error) { return json.Marshal(p.Ops) }

var vmResource = schema.GroupResource{Group: virtv1.GroupName, Resource: "virtualmachines"}

func conflict(vm *virtv1.VirtualMachine, format string, args ...any) error {
	return apierrors.NewConflict(vmResource, vm.Name, fmt.Errorf(format, args...))
}

// running reports whether vmi exists and has not finished.
func running(vmi *virtv1.VirtualMachineInstance) bool {
	return vmi != nil && !vmi.Status.Phase.IsFinal()
}

// Start is the start call: Halted becomes Always (the guest paused at its start when paused); a
// Manual or RerunOnFailure VM gets a Start request; Always and Once refuse (they start by themselves).
func Start(vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance, paused bool) (Patch, error) {
	strategy := vm.Spec.EffectiveRunStrategy()
	switch strategy {
	case virtv1.RunStrategyHalted:
		p := setRunStrategy(vm, virtv1.RunStrategyAlways)
		if paused {
			if vm.Spec.Template == nil {
				return Patch{}, apierrors.NewBadRequest(fmt.Sprintf("virtualmachine %s has no spec.template", vm.Name))
			}
			p.Ops = append(p.Ops, Op{Op: "add", Path: "/spec/template/spec/startStrategy", Value: virtv1.StartStrategyPaused})
		}
		return p, nil
	case virtv1.RunStrategyManual, virtv1.RunStrategyRerunOnFailure:
		if strategy == virtv1.RunStrategyRerunOnFailure && vmi != nil && vmi.Status.Phase == virtv1.Failed {
			return Patch{}, conflict(vm, "%s does not support starting a VM from the failed state: it restarts by itself", strategy)
		}
		if running(vmi) {
			return Patch{}, conflict(vm, "VM is already running")
		}
		req := virtv1.VirtualMachineStateChangeRequest{Action: virtv1.StartRequest}
		if paused {
			req.Data = map[string]string{virtv1.StartRequestDataPausedKey: virtv1.StartRequestDataPausedTrue}
		}
		return changeRequests(vm, false, req)
	default: // Always, Once
		return Patch{}, conflict(vm, "runStrategy %s does not support manual start requests", strategy)
	}
}

// Stop is the stop call: Always and Once become Halted; a Manual or RerunOnFailure VM (or a Halted
// one whose instance still runs) gets a Stop request for the running instance; a VM with no running
// instance refuses.
func Stop(vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance) (Patch, error) {
	strategy := vm.Spec.EffectiveRunStrategy()
	switch strategy {
	case virtv1.RunStrategyAlways, virtv1.RunStrategyOnce:
		return setRunStrategy(vm, virtv1.RunStrategyHalted), nil
	default: // Halted, Manual, RerunOnFailure
		if !running(vmi) {
			return Patch{}, conflict(vm, "VM is not running")
		}
		return changeRequests(vm, true, virtv1.VirtualMachineStateChangeRequest{Action: virtv1.StopRequest, UID: uidOf(vmi)})
	}
}

// Restart is the restart call: [Stop{uid of the running instance}, Start]. A Halted VM, or one with
// no running instance, refuses.
func Restart(vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance) (Patch, error) {
	if s := vm.Spec.EffectiveRunStrategy(); s == virtv1.RunStrategyHalted {
		return Patch{}, conflict(vm, "runStrategy %s does not support manual restart requests", s)
	}
	if !running(vmi) {
		return Patch{}, conflict(vm, "VM is not running")
	}
	return changeRequests(vm, false,
		virtv1.VirtualMachineStateChangeRequest{Action: virtv1.StopRequest, UID: uidOf(vmi)},
		virtv1.VirtualMachineStateChangeRequest{Action: virtv1.StartRequest})
}

func uidOf(vmi *virtv1.VirtualMachineInstance) *types.UID {
	uid := vmi.UID
	return &uid
}

// setRunStrategy tests the current value and replaces it: spec.running when the VM uses the
// deprecated field, else spec.runStrategy.
func setRunStrategy(vm *virtv1.VirtualMachine, to virtv1.VirtualMachineRunStrategy) Patch {
	if vm.Spec.RunStrategy == nil && vm.Spec.Running != nil {
		return Patch{Ops: []Op{
			{Op: "test", Path: "/spec/running", Value: *vm.Spec.Running},
			{Op: "replace", Path: "/spec/running", Value: to == virtv1.RunStrategyAlways},
		}}
	}
	if vm.Spec.RunStrategy == nil {
		// Neither field set (Halted by default): there is no value to test, so test that the spec
		// has not changed since it was read (its generation).
		return Patch{Ops: []Op{
			{Op: "test", Path: "/metadata/generation", Value: vm.Generation},
			{Op: "add", Path: "/spec/runStrategy", Value: to},
		}}
	}
	return Patch{Ops: []Op{
		{Op: "test", Path: "/spec/runStrategy", Value: *vm.Spec.RunStrategy},
		{Op: "replace", Path: "/spec/runStrategy", Value: to},
	}}
}

// errUnderway: a start or restart while another request is still pending.
var errUnderway = errors.New("a start, stop or restart request is already underway")

// changeRequests appends reqs to status.stateChangeRequests. A stop replaces any pending requests
// (stopping wins); anything else refuses while a request is pending.
func changeRequests(vm *virtv1.VirtualMachine, replace bool, reqs ...virtv1.VirtualMachineStateChangeRequest) (Patch, error) {
	pending := vm.Status.StateChangeRequests
	if len(pending) > 0 && !replace {
		return Patch{}, apierrors.NewConflict(vmResource, vm.Name, errUnderway)
	}
	if equality.Semantic.DeepEqual(vm.Status, virtv1.VirtualMachineStatus{}) {
		// No status written yet (there may be no /status to add to): add it whole, provided the
		// object has not changed since it was read.
		return Patch{Status: true, Ops: []Op{
			{Op: "test", Path: "/metadata/resourceVersion", Value: vm.ResourceVersion},
			{Op: "add", Path: "/status", Value: virtv1.VirtualMachineStatus{StateChangeRequests: reqs}},
		}}, nil
	}
	if len(pending) == 0 {
		// The list is absent (omitempty): test that it still is, then add it.
		return Patch{Status: true, Ops: []Op{
			{Op: "test", Path: "/status/stateChangeRequests", Value: nil},
			{Op: "add", Path: "/status/stateChangeRequests", Value: reqs},
		}}, nil
	}
	return Patch{Status: true, Ops: []Op{
		{Op: "test", Path: "/status/stateChangeRequests", Value: pending},
		{Op: "replace", Path: "/status/stateChangeRequests", Value: reqs},
	}}, nil
}
