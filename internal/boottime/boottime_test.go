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

func TestSkewedClockTellsBootTimesUnskewed(t *testing.T) {
	skewed := Clock{Skew: -90 * time.Second}
	before, now, after := time.Now(), skewed.Now(), time.Now()
	assert.False(t, now.Before(before.Add(-90*time.Second-time.Second)) || now.After(after.Add(-90*time.Second+time.Second)), "behind the wall clock by the skew")
	for _, c := range []Clock{skewed, {}} {
		b0 := Now()
		of := c.Of(c.Now())
		b1 := Now()
		assert.True(t, b0 <= of && of <= b1, "Of undoes Now (and the skew): %s not within [%s, %s]", of, b0, b1)
	}
}
