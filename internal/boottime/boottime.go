// Package boottime tells time by the kernel's CLOCK_BOOTTIME, which never steps and goes on while
// the machine is suspended or frozen: the clock of every "how long since" that fences a guest. Go's
// own monotonic clock stops while the machine is suspended, so a node that thaws would count the
// time it was away as none; the wall clock steps with NTP or by hand.
package boottime

import (
	"time"

	"golang.org/x/sys/unix"
)

// Now is the time since the machine booted, suspended time included. Where CLOCK_BOOTTIME cannot be
// read (never on Linux since 2.6.39) it falls back to Go's monotonic clock since the process started.
func Now() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return fallbackBoot + time.Since(started)
	}
	return time.Duration(ts.Nano())
}

var (
	started      = time.Now()
	fallbackBoot = time.Duration(0)
	startedBoot  = Now()
)

// Clock is a k8s.io/utils/clock.PassiveClock whose times advance with CLOCK_BOOTTIME from the wall
// time the process started at: close to the wall clock, but never stepped, and suspended time
// counts. Its times carry no monotonic reading, so differences between them are boot-time
// differences.
type Clock struct {
	// Skew is added to every time the clock tells, as a node whose wall clock is off by that
	// much would tell it (fault injection: make chaos skews one agent's clock this way, since the
	// machine's own clock is shared by every node of the local cluster).
	Skew time.Duration
}

// Now is the process's start time (wall) plus the boot time since, plus Skew.
func (c Clock) Now() time.Time { return started.Round(0).Add(c.Skew + Now() - startedBoot) }

// Since is the boot time since t (a time of this clock).
func (c Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Of is the boot time of t, a time of c (the inverse of c.Now).
func (c Clock) Of(t time.Time) time.Duration { return t.Sub(started.Round(0)) - c.Skew + startedBoot }
