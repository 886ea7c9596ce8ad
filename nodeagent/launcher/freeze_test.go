package launcher

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The loop's freeze state: a freeze arms the thaw timer; an answer about an older state is dropped;
// failed thaws are retried, then given up so that a guest cannot block its migration for ever.
func TestFreezeState(t *testing.T) {
	g := &guest{cfg: &Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	g.freezing = 1
	assert.NoError(t, g.freezeOp(request{op: opFreezeDone, outcome: freezeOK, grace: time.Hour}))
	assert.True(t, g.frozen)
	assert.Zero(t, g.freezing)
	assert.NotNil(t, g.thaw, "the unfreeze timeout is armed")
	stale := g.freezeGen
	assert.NoError(t, g.freezeOp(request{op: opThawed}))
	g.freezing = 1
	assert.NoError(t, g.freezeOp(request{op: opFreezeDone, outcome: freezeOK, grace: time.Hour}))
	frozenAt := g.freezeGen

	assert.NoError(t, g.freezeOp(request{op: opThawed, freezeGen: stale}))
	assert.True(t, g.frozen, "a thaw of an older freeze is dropped")

	for i := 1; i < maxThawTries; i++ {
		assert.NoError(t, g.freezeOp(request{op: opThawFailed, freezeGen: frozenAt}))
		assert.True(t, g.frozen, "try %d failed: still frozen, tried again", i)
		assert.NotNil(t, g.thaw)
	}
	assert.NoError(t, g.freezeOp(request{op: opThawFailed, freezeGen: frozenAt}))
	assert.False(t, g.frozen, "given up after %d tries", maxThawTries)
	assert.Nil(t, g.thaw)

	g.freezing = 1
	assert.NoError(t, g.freezeOp(request{op: opFreezeDone, outcome: freezeSkipped}))
	assert.False(t, g.frozen, "nothing was asked of the agent")
	assert.Zero(t, g.freezing)

	g.freezing = 1
	assert.NoError(t, g.freezeOp(request{op: opFreezeDone, outcome: freezeOK, grace: time.Hour}))
	old := g.freezeGen
	g.notFrozen() // a reset
	assert.NoError(t, g.freezeOp(request{op: opThawFailed, freezeGen: old}))
	assert.False(t, g.frozen, "a failed thaw of a freeze a reset ended does not freeze it again")
	assert.NoError(t, g.freezeOp(request{op: opThawed}))
	assert.False(t, g.frozen, "the user's thaw counts whatever the state")
}

// Freezing a frozen guest succeeds without asking the agent, with the new unfreeze timeout (as
// KubeVirt's freeze, which its conformance spec 7480 calls five times in a row).
func TestFreezeAgain(t *testing.T) {
	g := &guest{cfg: &Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	assert.ErrorIs(t, g.freezeOp(request{op: opFreezeAgain, grace: time.Hour}), errNotFrozen, "not frozen: freeze through the agent")
	g.freezing = 1
	assert.NoError(t, g.freezeOp(request{op: opFreezeDone, outcome: freezeOK, grace: time.Hour}))
	first := g.thaw
	gen := g.freezeGen
	assert.NoError(t, g.freezeOp(request{op: opFreezeAgain, grace: time.Minute}))
	assert.True(t, g.frozen)
	assert.NotSame(t, first, g.thaw, "the thaw timer is armed again")
	assert.Equal(t, gen, g.freezeGen, "the same freeze: a thaw started for it still counts")
	g.freezing = 1
	assert.ErrorIs(t, g.freezeOp(request{op: opFreezeAgain, grace: time.Hour}), errNotFrozen, "a freeze under way: wait for it")
}
