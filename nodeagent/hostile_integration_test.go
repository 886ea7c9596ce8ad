package nodeagent_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/testenv"
)

// A tenant can stop their launcher's process (`edit` includes pods/exec, and the exec'd process runs
// as the launcher's user): its socket then accepts and never answers. However many of a node's
// launchers do that — here as many as the agent has workers — the other guests' launchers are still
// asked for their status in time (else they fence their guests after launcherv1.AgentSilenceLimit)
// and their guests keep running.
func TestUnresponsiveLaunchersDoNotStallTheirNeighbours(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	n := newNode(t, ns)
	n.start(t)
	const hostileCount = 8 // the agent's workers
	healthy := n.scheduleGuest(t, ns, "healthy", nil)
	var hostile []*guest
	for i := range hostileCount {
		hostile = append(hostile, n.scheduleGuest(t, ns, fmt.Sprintf("hostile-%d", i), nil))
	}
	healthy.waitPhase(t, virtv1.Running)
	for _, g := range hostile {
		g.waitPhase(t, virtv1.Running)
	}
	for _, g := range hostile {
		g.launcher.Stall()
	}
	stalled := time.Now()

	// Watch past the time an unresponsive launcher is asked again (15 s), so that both the first
	// round of stalled polls and the next one fall in the window.
	const window = 20 * time.Second
	// A poll of an unresponsive launcher holds a worker for at most 3 s (the agent's poll timeout);
	// with one stalled launcher per worker, the healthy one waits at most that long, plus scheduling.
	const maxGap = 5 * time.Second
	assert.Never(t, func() bool { return gapSince(healthy.launcher.Polls(), stalled) > maxGap }, window, 100*time.Millisecond,
		"the healthy launcher was not polled for more than %s", maxGap)
	gap := gapSince(healthy.launcher.Polls(), stalled)
	t.Logf("longest wait between polls of the healthy launcher, with %d stalled neighbours: %s", hostileCount, gap.Round(time.Millisecond))
	assert.Less(t, gap, maxGap)
	assert.Equal(t, virtv1.Running, healthy.get(t).Status.Phase, "the healthy guest runs on")
}

// gapSince is the longest time between consecutive polls after from (counting from from, and up to
// now when the last poll is older).
func gapSince(polls []time.Time, from time.Time) time.Duration {
	var longest time.Duration
	last := from
	for _, p := range append(polls, time.Now()) {
		if p.Before(from) {
			continue
		}
		longest = max(longest, p.Sub(last))
		last = p
	}
	return longest
}
