package consolelog

import (
	"bytes"
	"fmt"
	"io"
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

// writerFunc is an io.Writer of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestDrainCountsEveryByteItDrops: a guest that keeps writing while the copy to stdout is under way
// (a slow stdout) makes the log outgrow its bound; every byte it wrote is either copied or counted
// as dropped, and the log never holds more than 4 × MaxSerialLog.
func TestDrainCountsEveryByteItDrops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "serial0.log")
	if err := os.WriteFile(path, bytes.Repeat([]byte("x"), MaxSerialLog+MaxSerialLog/2), 0o600); err != nil {
		t.Fatal(err)
	}
	guest, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer guest.Close()
	written := int64(MaxSerialLog + MaxSerialLog/2)
	var out bytes.Buffer
	stdout := writerFunc(func(p []byte) (int, error) {
		if written < 40*MaxSerialLog { // the guest writes three bytes for every two copied
			k, err := guest.Write(bytes.Repeat([]byte("y"), len(p)*3/2))
			written += int64(k)
			if err != nil {
				return 0, err
			}
		}
		return out.Write(p)
	})
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 1000 {
		if err := drain(f, stdout); err != nil {
			t.Fatal(err)
		}
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() >= 4*MaxSerialLog {
			t.Fatalf("the log holds %d bytes, past 4 × MaxSerialLog", st.Size())
		}
		if pos, _ := f.Seek(0, io.SeekCurrent); pos == st.Size() && written >= 40*MaxSerialLog {
			break
		}
	}
	copied, dropped := int64(0), int64(0)
	for _, line := range strings.SplitAfter(out.String(), "\n") {
		var n int64
		if _, err := fmt.Sscanf(line, "[podvirt: %d bytes", &n); err == nil {
			dropped += n
			continue
		}
		copied += int64(len(strings.TrimRight(line, "\n")))
	}
	if copied+dropped != written {
		t.Fatalf("the guest wrote %d bytes: %d copied and %d counted as dropped (%d unaccounted for)", written, copied, dropped, written-copied-dropped)
	}
	if dropped == 0 {
		t.Fatal("nothing dropped: the guest never outran the copying")
	}
}
