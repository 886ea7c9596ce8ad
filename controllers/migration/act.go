package migration

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/controllers/podtemplate"
	"github.com/podvirt/podvirt/internal/statuspatch"
)

// act carries out the decision's one action.
func (r *Reconciler) act(ctx context.Context, s *scope, d decision) error {
	switch d.action {
	case actBegin:
		return r.writeInstance(ctx, s.inst, func(st *virtv1.VirtualMachineInstanceStatus) {
			st.MigrationState = &virtv1.VirtualMachineInstanceMigrationState{
				MigrationUID: string(s.m.UID),
				SourceNode:   st.NodeName,
				SourcePod:    st.LauncherPod,
				TargetPod:    podtemplate.TargetPodName(s.inst, string(s.m.UID)),
				Mode:         virtv1.MigrationPreCopy,
				// The settings the migration runs with (the source's agent hands the bandwidth and
				// the completion timeout to its launcher), fixed when it begins.
				MigrationConfiguration: &virtv1.MigrationConfiguration{
					BandwidthPerMigration:             ptr.To(s.settings.BandwidthPerMigration.DeepCopy()),
					CompletionTimeoutPerGiB:           ptr.To(s.settings.CompletionTimeoutPerGiB),
					ParallelMigrationsPerCluster:      ptr.To(s.settings.ParallelMigrationsPerCluster),
					ParallelOutboundMigrationsPerNode: ptr.To(s.settings.ParallelOutboundMigrationsPerNode),
				},
			}
		})
	case actCreateTarget:
		if err := r.Client.Create(ctx, s.render); err != nil && !apierrors.IsAlreadyExists(err) {
			r.Recorder.Eventf(s.m, nil, corev1.EventTypeWarning, virtv1.ReasonFailedCreate, "Create", "Error creating migration target pod %s: %v", s.render.Name, err)
			return fmt.Errorf("create target pod: %w", err)
		}
		r.Recorder.Eventf(s.m, s.render, corev1.EventTypeNormal, ReasonTargetCreated, "Create", "Created migration target pod %s", s.render.Name)
	case actRecordTargetNode:
		return r.writeInstance(ctx, s.inst, func(st *virtv1.VirtualMachineInstanceStatus) {
			st.MigrationState.TargetNode = s.target.Spec.NodeName
		})
	case actRequestAbort:
		if err := r.writeInstance(ctx, s.inst, func(st *virtv1.VirtualMachineInstanceStatus) {
			st.MigrationState.AbortRequested, st.MigrationState.AbortStatus = true, virtv1.MigrationAbortInProgress
		}); err != nil {
			return err
		}
		r.Recorder.Eventf(s.m, s.inst, corev1.EventTypeWarning, d.reason, "Abort", "Aborting the migration: %s", d.message)
	case actFailInstance:
		now := metav1.NewTime(s.now)
		return r.writeInstance(ctx, s.inst, func(st *virtv1.VirtualMachineInstanceStatus) {
			ms := st.MigrationState
			ms.Failed, ms.FailureReason, ms.EndTimestamp = true, d.message, &now
		})
	case actRemoveTargets:
		for _, p := range s.leftovers {
			if err := r.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete target pod %s: %w", p.Name, err)
			}
		}
	case actRelease:
		patch := client.MergeFrom(s.m.DeepCopy())
		controllerutil.RemoveFinalizer(s.m, virtv1.MigrationFinalizer)
		if err := r.Client.Patch(ctx, s.m, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("remove finalizer: %w", err)
		}
	case actCollect:
		return r.collect(ctx, s.m)
	}
	return nil
}

// writeInstance changes the instance's status and writes it under the optimistic lock (the node
// agents write the same migration state).
func (r *Reconciler) writeInstance(ctx context.Context, inst *virtv1.VirtualMachineInstance, change func(*virtv1.VirtualMachineInstanceStatus)) error {
	orig := inst.DeepCopy()
	change(&inst.Status)
	_, err := statuspatch.Write(ctx, r.Client, orig, inst, "instance")
	return err
}
