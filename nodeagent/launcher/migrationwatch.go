package launcher

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"libvirt.org/go/libvirt"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
)

// migrationWatch decides when a running migration has passed one of its bounds (see
// launcherv1.MigrationProgressTimeout): progress is the data left to send reaching a new low.
type migrationWatch struct {
	start        time.Time
	progress     time.Duration // no new low for this long aborts
	perGiB       time.Duration // the completion bound per GiB of data to send
	total        uint64        // the data in all of the samples since lastProgress was reset
	lowest       uint64        // the least data left seen since
	lastProgress time.Time
}

// newMigrationWatch starts watching a migration started at start with req's bounds.
func newMigrationWatch(start time.Time, req launcherv1.MigrateRequest) *migrationWatch {
	w := &migrationWatch{start: start, lastProgress: start,
		progress: launcherv1.MigrationProgressTimeout, perGiB: launcherv1.MigrationCompletionTimeoutPerGiB}
	if req.ProgressTimeoutSeconds > 0 {
		w.progress = time.Duration(req.ProgressTimeoutSeconds) * time.Second
	}
	if req.CompletionTimeoutPerGiBSeconds > 0 {
		w.perGiB = time.Duration(req.CompletionTimeoutPerGiBSeconds) * time.Second
	}
	return w
}

// observe takes one sample of libvirt's job figures (bytes in all and left to send) at now and
// says why the migration must be aborted, or "". A sample with nothing in all (the job still setting
// up) says nothing, and a new total (the disks copied, the memory next) starts the low anew.
func (w *migrationWatch) observe(now time.Time, total, remaining uint64) string {
	switch {
	case total == 0:
		return w.overdue(now, total)
	case total != w.total:
		w.total, w.lowest, w.lastProgress = total, remaining, now
	case remaining < w.lowest:
		w.lowest, w.lastProgress = remaining, now
	}
	if why := w.overdue(now, total); why != "" {
		return why
	}
	if now.Sub(w.lastProgress) > w.progress {
		return fmt.Sprintf("the migration made no progress for %s (%d bytes still to send): aborted, the guest runs on the source",
			w.progress, remaining)
	}
	return ""
}

// overdue says whether the migration has run past its completion bound for total bytes to send.
func (w *migrationWatch) overdue(now time.Time, total uint64) string {
	const gib = 1 << 30
	gibs := max(1, total/gib+min(1, total%gib))
	limit := time.Duration(math.MaxInt64) // for more GiB than a Duration can count: never
	if gibs <= uint64(math.MaxInt64/int64(w.perGiB)) {
		limit = w.perGiB * time.Duration(gibs)
	}
	if now.Sub(w.start) > limit {
		return fmt.Sprintf("the migration did not complete within %s (%s per GiB of the %d GiB to send): aborted, the guest runs on the source",
			limit, w.perGiB, gibs)
	}
	return ""
}

// migrationWatchInterval is how often a running migration's figures are sampled.
const migrationWatchInterval = time.Second

// watchMigration samples dom's migration job until ended is closed, and aborts the job once w says
// it passed a bound; the reason is left in reason for the migration's outcome.
func watchMigration(dom *libvirt.Domain, w *migrationWatch, ended <-chan struct{}, reason *atomic.Pointer[string]) {
	tick := time.NewTicker(migrationWatchInterval)
	defer tick.Stop()
	for {
		select {
		case <-ended:
			return
		case now := <-tick.C:
			info, err := dom.GetJobInfo()
			if err != nil || info.Type == libvirt.DOMAIN_JOB_NONE {
				continue // not started yet, or ending: Migrate3 returns
			}
			if why := w.observe(now, info.DataTotal, info.DataRemaining); why != "" && dom.AbortJob() == nil {
				reason.Store(&why) // Migrate3 returns with the abort
				return
			} // an abort that failed is tried again at the next sample

		}
	}
}
