package migration

import (
	"context"
	"fmt"
	"sort"

	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// FinishedToKeep is how many ended migrations of one instance are kept (KubeVirt keeps 5): older
// ones are deleted, so an instance that migrates every day does not collect migrations for ever.
const FinishedToKeep = 5

// collect deletes the ended migrations of m's instance beyond the FinishedToKeep newest, m itself
// included (it is called for an ended migration, whose status the pass no longer changes).
func (r *Reconciler) collect(ctx context.Context, m *virtv1.VirtualMachineInstanceMigration) error {
	var list virtv1.VirtualMachineInstanceMigrationList
	if err := r.Client.List(ctx, &list, client.InNamespace(m.Namespace)); err != nil {
		return fmt.Errorf("list migrations: %w", err)
	}
	for _, old := range finishedToDelete(list.Items, m.Spec.VMIName, FinishedToKeep) {
		if err := r.Client.Delete(ctx, old, client.Preconditions{UID: &old.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete ended migration %s: %w", old.Name, err)
		}
	}
	return nil
}

// finishedToDelete picks, among all, the ended migrations of instance vmi beyond the keep newest
// (by creation, then name).
func finishedToDelete(all []virtv1.VirtualMachineInstanceMigration, vmi string, keep int) []*virtv1.VirtualMachineInstanceMigration {
	var ended []*virtv1.VirtualMachineInstanceMigration
	for i := range all {
		if m := &all[i]; m.Spec.VMIName == vmi && m.Status.Phase.IsFinal() && m.DeletionTimestamp == nil {
			ended = append(ended, m)
		}
	}
	sort.Slice(ended, func(i, j int) bool {
		a, b := ended[i].CreationTimestamp, ended[j].CreationTimestamp
		if !a.Equal(&b) {
			return b.Before(&a) // newest first
		}
		return ended[i].Name > ended[j].Name
	})
	if len(ended) <= keep {
		return nil
	}
	return ended[keep:]
}
