package nodeagent

import (
	"context"
	"errors"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
)

// boundedLauncher gives the quick calls the reconciler makes of a launcher (status, shutdown, abort
// of a migration) pollTimeout each instead of launcherclient's longer default, and records in
// unresponsive whether one of them ran out of time: the pass then asks again after
// unresponsiveRetry instead of at once. The slow calls (a sync, a migration's start or preparation)
// keep their own bounds; syncs are also limited in number (Reconciler.slow).
type boundedLauncher struct {
	Launcher
	unresponsive *bool
}

func (b boundedLauncher) note(ctx context.Context, err error) {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		*b.unresponsive = true
	}
}

// Status asks for the guest's state within pollTimeout.
func (b boundedLauncher) Status(ctx context.Context) (launcherv1.Status, error) {
	call, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()
	st, err := b.Launcher.Status(call)
	b.note(ctx, err)
	return st, err
}

// Shutdown asks for an ACPI shutdown within pollTimeout.
func (b boundedLauncher) Shutdown(ctx context.Context, gracePeriodSeconds int64) error {
	call, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()
	err := b.Launcher.Shutdown(call, gracePeriodSeconds)
	b.note(ctx, err)
	return err
}

// SetNodeCheck tells where to ask for the kubelet's lease within pollTimeout.
func (b boundedLauncher) SetNodeCheck(ctx context.Context, nc launcherv1.NodeCheck) error {
	call, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()
	err := b.Launcher.SetNodeCheck(call, nc)
	b.note(ctx, err)
	return err
}

// CancelMigration asks to abort the running migration within pollTimeout.
func (b boundedLauncher) CancelMigration(ctx context.Context) error {
	call, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()
	err := b.Launcher.CancelMigration(call)
	b.note(ctx, err)
	return err
}
