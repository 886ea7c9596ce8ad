package v1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFailedEvacuations(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	vmi := &VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", CreationTimestamp: created}}
	// m's age is how long before now it was created; now is 3 h after the instance.
	now := created.Add(3 * time.Hour)
	m := func(vmi, node string, phase VirtualMachineInstanceMigrationPhase, age time.Duration) VirtualMachineInstanceMigration {
		return VirtualMachineInstanceMigration{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{EvacuationNodeAnnotation: node}, CreationTimestamp: metav1.NewTime(now.Add(-age))},
			Spec:       VirtualMachineInstanceMigrationSpec{VMIName: vmi}, Status: VirtualMachineInstanceMigrationStatus{Phase: phase},
		}
	}
	all := []VirtualMachineInstanceMigration{
		m("vm", "node-a", MigrationFailed, time.Minute),    // counts
		m("vm", "node-a", MigrationFailed, 30*time.Minute), // counts
		m("vm", "node-a", MigrationSucceeded, time.Minute), // did not fail
		m("vm", "node-b", MigrationFailed, time.Minute),    // another node
		m("other", "node-a", MigrationFailed, time.Minute), // another instance
		m("vm", "node-a", MigrationFailed, 4*time.Hour),    // an earlier instance of the same name
		m("vm", "node-a", MigrationFailed, 2*time.Hour),    // an earlier drain
		{Spec: VirtualMachineInstanceMigrationSpec{VMIName: "vm"}, Status: VirtualMachineInstanceMigrationStatus{Phase: MigrationFailed}}, // not an evacuation
	}
	if got := FailedEvacuations(all, vmi, "node-a", now); got != 2 {
		t.Errorf("FailedEvacuations = %d, want 2", got)
	}
}
