package dashboard

import (
	"fmt"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// thousand is 1,000 VMs, every other one with a running instance.
func thousand() ([]virtv1.VirtualMachine, []virtv1.VirtualMachineInstance) {
	var vms []virtv1.VirtualMachine
	var vmis []virtv1.VirtualMachineInstance
	for i := range 1000 {
		v := vm(fmt.Sprintf("vm-%04d", i), "Stopped", virtv1.RunStrategyHalted)
		if i%2 == 0 {
			v = vm(v.Name, "Running", virtv1.RunStrategyAlways)
			inst := virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: v.Name}}
			inst.Status.Phase, inst.Status.NodeName = virtv1.Running, "node-1"
			vmis = append(vmis, inst)
		}
		vms = append(vms, v)
	}
	return vms, vmis
}

func snapshotOf(vms []virtv1.VirtualMachine, vmis []virtv1.VirtualMachineInstance) SnapshotMsg {
	return SnapshotMsg{Namespace: "demo", VMs: Rows(vms, vmis), VMIs: InstanceRows(vmis)}
}

// BenchmarkFirstRender: the first snapshot of 1,000 VMs joined, taken in and drawn.
func BenchmarkFirstRender(b *testing.B) {
	vms, vmis := thousand()
	for b.Loop() {
		m, _ := New("demo", &fakeActions{}, &fakeWatcher{}, time.Now, false).Update(snapshotOf(vms, vmis))
		_ = m.View()
	}
}

// BenchmarkWatchEvent: one watch event at 1,000 VMs (a new snapshot joined, taken in, drawn).
func BenchmarkWatchEvent(b *testing.B) {
	vms, vmis := thousand()
	m, _ := New("demo", &fakeActions{}, &fakeWatcher{}, time.Now, false).Update(snapshotOf(vms, vmis))
	for b.Loop() {
		m, _ = m.Update(snapshotOf(vms, vmis))
		_ = m.View()
	}
}

// BenchmarkKeypress: moving the cursor at 1,000 VMs, drawn after each key.
func BenchmarkKeypress(b *testing.B) {
	vms, vmis := thousand()
	m, _ := New("demo", &fakeActions{}, &fakeWatcher{}, time.Now, false).Update(snapshotOf(vms, vmis))
	m, _ = m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	down := tea.KeyPressMsg{Code: tea.KeyDown}
	for b.Loop() {
		m, _ = m.Update(down)
		_ = m.View()
	}
}
