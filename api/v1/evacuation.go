package v1

// EvacuationNodeLabel marks a migration created to evacuate its instance (status.evacuationNodeName):
// its value is the node the instance moves off.
const EvacuationNodeLabel = "podvirt.io/evacuation-node"

// MaxEvacuationAttempts is how many migrations an evacuation tries before it gives up. The launcher
// Pod's eviction is then let through (its guest stops; the VM starts again where its run strategy
// says), so that a drain always ends.
const MaxEvacuationAttempts = 3

// FailedEvacuations counts, among migrations, the failed ones that evacuated vmi off node (those
// created after vmi: an earlier instance of the same name does not count).
func FailedEvacuations(migrations []VirtualMachineInstanceMigration, vmi *VirtualMachineInstance, node string) int {
	n := 0
	for i := range migrations {
		m := &migrations[i]
		if m.Spec.VMIName == vmi.Name && m.Labels[EvacuationNodeLabel] == node && m.Status.Phase == MigrationFailed &&
			!m.CreationTimestamp.Before(&vmi.CreationTimestamp) {
			n++
		}
	}
	return n
}
