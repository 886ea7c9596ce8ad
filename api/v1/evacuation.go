package v1

import "time"

// EvacuationNodeAnnotation marks a migration created to evacuate its instance
// (status.evacuationNodeName): its value is the node the instance moves off (an annotation: a node's
// name may be longer than a label value).
const EvacuationNodeAnnotation = "podvirt.io/evacuation-node"

// MaxEvacuationAttempts is how many migrations an evacuation tries before it gives up. The launcher
// Pod's eviction is then let through (its guest stops; the VM starts again where its run strategy
// says), so that a drain always ends.
const MaxEvacuationAttempts = 3

// EvacuationAttemptsWindow is how recent a failed attempt must be to count: an earlier drain's
// failures do not let a later one stop the VM without trying.
const EvacuationAttemptsWindow = time.Hour

// FailedEvacuations counts, among migrations, the failed ones that evacuated vmi off node, created
// after vmi (an earlier instance of the same name does not count) and within
// EvacuationAttemptsWindow before now.
func FailedEvacuations(migrations []VirtualMachineInstanceMigration, vmi *VirtualMachineInstance, node string, now time.Time) int {
	n := 0
	for i := range migrations {
		m := &migrations[i]
		if m.Spec.VMIName == vmi.Name && m.Annotations[EvacuationNodeAnnotation] == node && m.Status.Phase == MigrationFailed &&
			!m.CreationTimestamp.Before(&vmi.CreationTimestamp) && now.Sub(m.CreationTimestamp.Time) <= EvacuationAttemptsWindow {
			n++
		}
	}
	return n
}
