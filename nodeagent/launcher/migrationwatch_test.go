package launcher

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
)

func TestMigrationWatch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	const gib = 1 << 30

	// Steady progress under the completion bound: never aborted; 2 GiB to send gives 300 s.
	w := newMigrationWatch(t0, launcherv1.MigrateRequest{})
	for s := 0; s <= 300; s += 10 {
		assert.Empty(t, w.observe(at(s), 2*gib, uint64(2*gib-s*(1<<20))), "at %d s", s)
	}
	assert.Equal(t, "the migration did not complete within 5m0s (2m30s per GiB of the 2 GiB to send): aborted, the guest runs on the source",
		w.observe(at(301), 2*gib, gib))

	// Dirtying as fast as it sends: the data left never reaches a new low.
	w = newMigrationWatch(t0, launcherv1.MigrateRequest{})
	assert.Empty(t, w.observe(at(1), 4*gib, gib/2))
	for s := 2; s <= 151; s++ {
		assert.Empty(t, w.observe(at(s), 4*gib, gib/2+uint64(s%3)), "at %d s", s)
	}
	assert.Equal(t, "the migration made no progress for 2m30s (536870912 bytes still to send): aborted, the guest runs on the source",
		w.observe(at(152), 4*gib, gib/2))

	// The request's bounds; less than a GiB counts as one.
	w = newMigrationWatch(t0, launcherv1.MigrateRequest{ProgressTimeoutSeconds: 5, CompletionTimeoutPerGiBSeconds: 2})
	assert.Empty(t, w.observe(at(2), 64<<20, 32<<20))
	assert.Contains(t, w.observe(at(3), 64<<20, 16<<20), "did not complete within 2s (2s per GiB of the 1 GiB to send)")

	// Samples of a job still setting up (nothing in all) are no low of zero that nothing could pass;
	// a new total (the disks copied, the memory next) starts the low anew.
	w = newMigrationWatch(t0, launcherv1.MigrateRequest{})
	assert.Empty(t, w.observe(at(1), 0, 0))
	assert.Empty(t, w.observe(at(140), 0, 0))
	assert.Empty(t, w.observe(at(141), 4*gib, 4*gib), "the first real sample starts the watch")
	assert.Empty(t, w.observe(at(300), 4*gib, 0), "disks mirrored")
	assert.Empty(t, w.observe(at(301), 5*gib, gib), "the memory next: a new total, a new low")
	assert.Empty(t, w.observe(at(450), 5*gib, gib/2))
	assert.Contains(t, w.observe(at(601), 5*gib, gib), "made no progress for 2m30s")

	// Setting up for longer than one GiB's worth is past the completion bound.
	w = newMigrationWatch(t0, launcherv1.MigrateRequest{})
	assert.Contains(t, w.observe(at(151), 0, 0), "did not complete within 2m30s")

	// A total of 2^64-1 bytes neither overflows nor aborts at once.
	w = newMigrationWatch(t0, launcherv1.MigrateRequest{})
	assert.Empty(t, w.observe(at(1), ^uint64(0), ^uint64(0)-1))
}
