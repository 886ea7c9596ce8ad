package consolelog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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

// TestDrainDropsWhatItFellBehind: a guest more than 2 × MaxSerialLog ahead of the copying (the
// follower starved) gets its uncopied output dropped, said so in the output, and the log emptied;
// less than that is copied whole.
func TestDrainDropsWhatItFellBehind(t *testing.T) {
	for _, c := range []struct {
		name    string
		size    int
		dropped bool
	}{
		{"within the bound", 2*MaxSerialLog - 10, false},
		{"past the bound", 5 * MaxSerialLog, true},
	} {
		path := filepath.Join(t.TempDir(), "serial0.log")
		if err := os.WriteFile(path, bytes.Repeat([]byte("x"), c.size), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := drain(f, &out); err != nil {
			t.Fatal(err)
		}
		f.Close()
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("[podvirt: %d bytes of the guest's serial output dropped", c.size)
		if got := strings.Contains(out.String(), want); got != c.dropped || (!c.dropped && out.Len() != c.size) {
			t.Errorf("%s: %d bytes out, dropped %v (want %v)", c.name, out.Len(), got, c.dropped)
		}
		if st.Size() != 0 {
			t.Errorf("%s: the log holds %d bytes after the drain, want it emptied", c.name, st.Size())
		}
	}
}
