package consolelog

import "testing"

// TestRotateDue: the log is emptied at a quiet moment once MaxSerialLog is copied, and at once past
// twice that, even while the guest keeps writing.
func TestRotateDue(t *testing.T) {
	const m = MaxSerialLog
	for _, c := range []struct {
		name         string
		copied, size int64
		want         bool
	}{
		{"little copied", m - 1, m - 1, false},
		{"copied, quiet", m, m, true},
		{"copied, more arriving", m, m + 100, false},
		{"twice copied, quiet", 2 * m, 2 * m, true},
		{"a guest that never pauses", 2 * m, 2*m + 100, true},
		{"long past the bound, never paused", 40 * m, 40*m + 1, true},
	} {
		if got := rotateDue(c.copied, c.size); got != c.want {
			t.Errorf("%s: rotateDue(%d, %d) = %v, want %v", c.name, c.copied, c.size, got, c.want)
		}
	}
}
