package migration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

func TestFinishedToDelete(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	mig := func(name, vmi string, phase virtv1.VirtualMachineInstanceMigrationPhase, age time.Duration) virtv1.VirtualMachineInstanceMigration {
		return virtv1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-age))},
			Spec: virtv1.VirtualMachineInstanceMigrationSpec{VMIName: vmi}, Status: virtv1.VirtualMachineInstanceMigrationStatus{Phase: phase}}
	}
	deleting := mig("deleting", "vm", virtv1.MigrationSucceeded, 10*time.Hour)
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	all := []virtv1.VirtualMachineInstanceMigration{
		mig("m1", "vm", virtv1.MigrationSucceeded, 7*time.Hour),
		mig("m2", "vm", virtv1.MigrationFailed, 6*time.Hour),
		mig("m3", "vm", virtv1.MigrationSucceeded, 5*time.Hour),
		mig("running", "vm", virtv1.MigrationRunning, 8*time.Hour), // not ended: never collected
		mig("m4", "vm", virtv1.MigrationSucceeded, 4*time.Hour),
		mig("m5", "vm", virtv1.MigrationSucceeded, 3*time.Hour),
		mig("m6", "vm", virtv1.MigrationFailed, 2*time.Hour),
		mig("m7", "vm", virtv1.MigrationSucceeded, time.Hour),
		mig("other", "other-vm", virtv1.MigrationSucceeded, 9*time.Hour), // another instance's
		deleting,
	}
	var got []string
	for _, m := range finishedToDelete(all, "vm", 5) {
		got = append(got, m.Name)
	}
	assert.Equal(t, []string{"m2", "m1"}, got, "the ended ones beyond the 5 newest, newest first")
	assert.Empty(t, finishedToDelete(all, "other-vm", 5))
	assert.Len(t, finishedToDelete(all, "vm", 0), 7)
}
