package v1

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The kubelet is known alive only from the start of the call before the one that saw its lease
// change; a failed call in between changes nothing, the first answer proves nothing.
func TestKubeletSeen(t *testing.T) {
	s := time.Second
	var k KubeletSeen
	k = k.Observe("r1", 100*s)
	assert.Zero(t, k.Alive, "one answer proves nothing")
	k = k.Observe("r1", 105*s)
	assert.Zero(t, k.Alive, "no change")
	k = k.Observe("r2", 110*s)
	assert.Equal(t, 105*s, k.Alive, "renewed after the previous call started")
	// A call at 115 s failed (not observed); the one at 120 s sees a change: after 110 s.
	k = k.Observe("r3", 120*s)
	assert.Equal(t, 110*s, k.Alive)
	k = k.Observe("r3", 125*s)
	assert.Equal(t, 110*s, k.Alive, "unchanged: still 110 s")
}

func TestFence(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name          string
		silent, alive time.Duration
		known, fence  bool
	}{
		{"agent heard", 39 * s, 0, false, false},
		{"agent silent, kubelet never known", 40 * s, 0, false, true},
		{"agent silent, kubelet alive 5 s ago", 10 * time.Minute, 5 * s, true, false},
		{"agent silent, kubelet alive 39 s ago", 10 * time.Minute, 39 * s, true, false},
		{"agent silent, kubelet last alive 40 s ago", 10 * time.Minute, 40 * s, true, true},
		{"agent heard, kubelet long gone", 1 * s, time.Hour, true, false},
	} {
		assert.Equal(t, tc.fence, Fence(AgentSilenceLimit, tc.silent, tc.alive, tc.known), tc.name)
	}
}
