package nodeagent

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
)

// stalledLauncher answers nothing until the caller gives up, as a launcher whose process a tenant
// stopped.
type stalledLauncher struct{ Launcher }

func (stalledLauncher) Status(ctx context.Context) (launcherv1.Status, error) {
	<-ctx.Done()
	return launcherv1.Status{}, ctx.Err()
}

func (stalledLauncher) Shutdown(ctx context.Context, _ int64) error {
	<-ctx.Done()
	return ctx.Err()
}

func (stalledLauncher) CancelMigration(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func (stalledLauncher) SetNodeCheck(ctx context.Context, _ launcherv1.NodeCheck) error {
	<-ctx.Done()
	return ctx.Err()
}

// Every quick call the reconciler makes of a launcher (a poll, a deletion's shutdown, a migration's
// abort) returns within pollTimeout and marks the launcher unresponsive; the caller's own end does not.
func TestBoundedLauncherCallsReturnInTime(t *testing.T) {
	for name, call := range map[string]func(context.Context, Launcher) error{
		"status":   func(ctx context.Context, l Launcher) error { _, err := l.Status(ctx); return err },
		"shutdown": func(ctx context.Context, l Launcher) error { return l.Shutdown(ctx, 30) },
		"abort":    func(ctx context.Context, l Launcher) error { return l.CancelMigration(ctx) },
	} {
		t.Run(name, func(t *testing.T) {
			var unresponsive bool
			l := boundedLauncher{Launcher: stalledLauncher{}, unresponsive: &unresponsive}
			start := time.Now()
			err := call(context.Background(), l)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Less(t, time.Since(start), pollTimeout+time.Second)
			assert.True(t, unresponsive)

			unresponsive = false
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_ = call(ctx, l)
			assert.False(t, unresponsive, "the caller's own cancellation says nothing of the launcher")
		})
	}
}
