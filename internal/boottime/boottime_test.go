package boottime

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/clock"
)

var _ clock.PassiveClock = Clock{}

func TestClockFollowsBootTime(t *testing.T) {
	b0, c0 := Now(), Clock{}.Now()
	assert.Positive(t, b0)
	assert.WithinDuration(t, time.Now(), c0, time.Second, "close to the wall clock")
	c1, b1 := Clock{}.Now(), Now()
	assert.InDelta(t, float64(b1-b0), float64(c1.Sub(c0)), float64(5*time.Millisecond), "the clocks advance together")
	assert.GreaterOrEqual(t, Clock{}.Since(c0), time.Duration(0))
	assert.Equal(t, c0, c0.Round(0), "no monotonic reading: differences are boot-time differences")
}
