package lifecycle

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

func vmWith(strategy virtv1.VirtualMachineRunStrategy, pending ...virtv1.VirtualMachineStateChangeRequest) *virtv1.VirtualMachine {
	return &virtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns", Generation: 3, ResourceVersion: "42"},
		Spec:       virtv1.VirtualMachineSpec{RunStrategy: ptr.To(strategy), Template: &virtv1.VirtualMachineInstanceTemplateSpec{}},
		Status:     virtv1.VirtualMachineStatus{PrintableStatus: virtv1.VirtualMachineStatusStopped, StateChangeRequests: pending},
	}
}

func vmiIn(phase virtv1.VirtualMachineInstancePhase) *virtv1.VirtualMachineInstance {
	return &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", UID: "uid-1"}, Status: virtv1.VirtualMachineInstanceStatus{Phase: phase}}
}

// ops renders a patch compactly for comparison.
func ops(t *testing.T, p Patch) string {
	t.Helper()
	b, err := p.JSON()
	require.NoError(t, err)
	if p.Status {
		return "status " + string(b)
	}
	return "spec " + string(b)
}

func TestCalls(t *testing.T) {
	uid := types.UID("uid-1")
	stopReq := virtv1.VirtualMachineStateChangeRequest{Action: virtv1.StopRequest, UID: &uid}
	for _, tc := range []struct {
		name     string
		call     func() (Patch, error)
		want     string // the patch, or "" when a Conflict is expected
		conflict string
	}{
		{"start halted", func() (Patch, error) { return Start(vmWith(virtv1.RunStrategyHalted), nil, false) },
			`spec [{"op":"test","path":"/spec/runStrategy","value":"Halted"},{"op":"replace","path":"/spec/runStrategy","value":"Always"}]`, ""},
		{"start halted paused", func() (Patch, error) { return Start(vmWith(virtv1.RunStrategyHalted), nil, true) },
			`spec [{"op":"test","path":"/spec/runStrategy","value":"Halted"},{"op":"replace","path":"/spec/runStrategy","value":"Always"},{"op":"add","path":"/spec/template/spec/startStrategy","value":"Paused"}]`, ""},
		{"start always", func() (Patch, error) { return Start(vmWith(virtv1.RunStrategyAlways), vmiIn(virtv1.Running), false) },
			"", "runStrategy Always does not support manual start requests"},
		{"start once", func() (Patch, error) { return Start(vmWith(virtv1.RunStrategyOnce), nil, false) },
			"", "runStrategy Once does not support manual start requests"},
		{"start manual", func() (Patch, error) { return Start(vmWith(virtv1.RunStrategyManual), nil, false) },
			`status [{"op":"test","path":"/status/stateChangeRequests","value":null},{"op":"add","path":"/status/stateChangeRequests","value":[{"action":"Start"}]}]`, ""},
		{"start manual paused after a shutdown", func() (Patch, error) { return Start(vmWith(virtv1.RunStrategyManual), vmiIn(virtv1.Succeeded), true) },
			`status [{"op":"test","path":"/status/stateChangeRequests","value":null},{"op":"add","path":"/status/stateChangeRequests","value":[{"action":"Start","data":{"paused":"true"}}]}]`, ""},
		{"start manual running", func() (Patch, error) { return Start(vmWith(virtv1.RunStrategyManual), vmiIn(virtv1.Running), false) },
			"", "VM is already running"},
		{"start rerun failed", func() (Patch, error) {
			return Start(vmWith(virtv1.RunStrategyRerunOnFailure), vmiIn(virtv1.Failed), false)
		},
			"", "RerunOnFailure does not support starting a VM from the failed state"},
		{"start while a request is pending", func() (Patch, error) {
			return Start(vmWith(virtv1.RunStrategyManual, stopReq), nil, false)
		}, "", "already underway"},
		{"stop always", func() (Patch, error) { return Stop(vmWith(virtv1.RunStrategyAlways), vmiIn(virtv1.Running)) },
			`spec [{"op":"test","path":"/spec/runStrategy","value":"Always"},{"op":"replace","path":"/spec/runStrategy","value":"Halted"}]`, ""},
		{"stop halted", func() (Patch, error) { return Stop(vmWith(virtv1.RunStrategyHalted), nil) },
			"", "VM is not running"},
		{"stop manual", func() (Patch, error) { return Stop(vmWith(virtv1.RunStrategyManual), vmiIn(virtv1.Running)) },
			`status [{"op":"test","path":"/status/stateChangeRequests","value":null},{"op":"add","path":"/status/stateChangeRequests","value":[{"action":"Stop","uid":"uid-1"}]}]`, ""},
		{"stop replaces a pending start", func() (Patch, error) {
			return Stop(vmWith(virtv1.RunStrategyManual, virtv1.VirtualMachineStateChangeRequest{Action: virtv1.StartRequest}), vmiIn(virtv1.Running))
		}, `status [{"op":"test","path":"/status/stateChangeRequests","value":[{"action":"Start"}]},{"op":"replace","path":"/status/stateChangeRequests","value":[{"action":"Stop","uid":"uid-1"}]}]`, ""},
		{"stop manual, nothing runs", func() (Patch, error) { return Stop(vmWith(virtv1.RunStrategyManual), vmiIn(virtv1.Succeeded)) },
			"", "VM is not running"},
		{"restart always", func() (Patch, error) { return Restart(vmWith(virtv1.RunStrategyAlways), vmiIn(virtv1.Running)) },
			`status [{"op":"test","path":"/status/stateChangeRequests","value":null},{"op":"add","path":"/status/stateChangeRequests","value":[{"action":"Stop","uid":"uid-1"},{"action":"Start"}]}]`, ""},
		{"restart halted", func() (Patch, error) { return Restart(vmWith(virtv1.RunStrategyHalted), vmiIn(virtv1.Running)) },
			"", "runStrategy Halted does not support manual restart requests"},
		{"restart, nothing runs", func() (Patch, error) { return Restart(vmWith(virtv1.RunStrategyAlways), nil) },
			"", "VM is not running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.call()
			if tc.conflict != "" {
				require.Error(t, err)
				assert.True(t, apierrors.IsConflict(err), "want 409 Conflict, got %v", err)
				assert.ErrorContains(t, err, tc.conflict)
				assert.ErrorContains(t, err, `virtualmachines.kubevirt.io "vm"`, "the error names the object")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, ops(t, p))
		})
	}
}

func TestDeprecatedRunning(t *testing.T) {
	vm := vmWith(virtv1.RunStrategyHalted)
	vm.Spec.RunStrategy, vm.Spec.Running = nil, ptr.To(false)
	p, err := Start(vm, nil, false)
	require.NoError(t, err)
	assert.Equal(t, `spec [{"op":"test","path":"/spec/running","value":false},{"op":"replace","path":"/spec/running","value":true}]`, ops(t, p))

	vm.Spec.Running = nil // neither field: Halted by default
	p, err = Start(vm, nil, false)
	require.NoError(t, err)
	assert.Equal(t, `spec [{"op":"test","path":"/metadata/generation","value":3},{"op":"add","path":"/spec/runStrategy","value":"Always"}]`, ops(t, p))
}

func TestFirstStatus(t *testing.T) {
	vm := vmWith(virtv1.RunStrategyManual)
	vm.Status = virtv1.VirtualMachineStatus{}
	p, err := Start(vm, nil, false)
	require.NoError(t, err)
	var got []map[string]any
	b, _ := p.JSON()
	require.NoError(t, json.Unmarshal(b, &got))
	assert.True(t, p.Status)
	assert.Equal(t, "/metadata/resourceVersion", got[0]["path"])
	assert.Equal(t, "add", got[1]["op"])
	assert.Equal(t, "/status", got[1]["path"])
}
