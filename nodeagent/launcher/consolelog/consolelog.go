// Package consolelog is the guest-console-log container's job: follow the guest's serial log in the
// launcher Pod's private directory and copy it to stdout, so `kubectl logs POD -c guest-console-log`
// shows what the guest printed. Pure Go; it never links libvirt.
package consolelog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	"github.com/podvirt/podvirt/nodeagent/launcher/lifetime"
)

// MaxSerialLog bounds serial0.log in the Pod's private directory: once Follow has copied this much to
// its output (where the kubelet keeps and rotates it) it empties the file (which qemu appends to,
// O_APPEND) at the first quiet moment, or at once past twice this much, and it drops what it falls
// more than twice this much behind (drain), so a guest writing without end cannot fill the node's
// disk.
const MaxSerialLog = 1 << 20

// Follow copies privateDir/serial0.log to w as it grows, from its start, until the launcher has ended,
// and then copies what is left. When ctx ends first (the Pod is being deleted and every container got
// SIGTERM) it keeps following while the launcher runs, so the guest's shutdown is in the log; it
// returns at once only if no launcher was ever seen. The launcher has ended when its exit file appears, or
// when its command socket, once seen answering, stops answering (a launcher killed without a chance to
// write the exit file). interval is how often it looks for more.
func Follow(ctx context.Context, privateDir string, w io.Writer, interval time.Duration) error {
	logPath := filepath.Join(privateDir, launcherv1.SerialLog)
	launcher := lifetime.New(privateDir)
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		ended := launcher.Ended()
		if f == nil {
			var err error
			f, err = os.OpenFile(logPath, os.O_RDWR, 0) // read, and emptied by rotate
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("open serial log: %w", err)
			}
		}
		if f != nil {
			if err := drain(f, w); err != nil {
				return err
			}
		}
		if ended {
			return nil
		}
		select {
		case <-ctx.Done():
			// The Pod is being deleted: every container gets SIGTERM at once, but the guest's
			// shutdown is what users want to see. Keep following until the launcher ends (the
			// kubelet's grace period bounds this); only a launcher never seen ends it at once.
			if !launcher.Seen() {
				if f != nil {
					return drain(f, w)
				}
				return nil
			}
			<-tick.C
		case <-tick.C:
		}
	}
}

// drain copies to w what the guest wrote since the last look, then empties the log when rotateDue
// says so. More than 2 × MaxSerialLog behind, the copying lost the race with the guest (the follower
// starved of CPU, a slow stdout): what it has not copied is dropped instead. Every byte dropped is
// counted in w; only what the guest writes between the last look and a truncation (microseconds)
// goes uncounted. The log stays under 4 × MaxSerialLog at every look, and under about
// 2 × MaxSerialLog and one interval's output while the copying keeps up.
func drain(f *os.File, w io.Writer) error {
	pos, size, err := where(f)
	if err != nil {
		return err
	}
	if size < pos { // emptied by another hand: read it from its start
		if pos, err = f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("serial log: %w", err)
		}
	}
	if behind := size - pos; behind > 2*MaxSerialLog {
		return drop(f, w, behind)
	}
	if _, err := io.Copy(w, io.LimitReader(f, size-pos)); err != nil { // what this look found, no more
		return fmt.Errorf("copy serial log: %w", err)
	}
	if pos, size, err = where(f); err != nil {
		return err
	}
	if rotateDue(pos, size) {
		return drop(f, w, size-pos)
	}
	return nil
}

// where is the log's read position and size.
func where(f *os.File) (pos, size int64, err error) {
	if pos, err = f.Seek(0, io.SeekCurrent); err != nil {
		return 0, 0, fmt.Errorf("serial log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("serial log: %w", err)
	}
	return pos, st.Size(), nil
}

// drop empties the log, saying in w how many bytes the guest wrote that were not copied.
func drop(f *os.File, w io.Writer, uncopied int64) error {
	if err := empty(f); err != nil {
		return err
	}
	if uncopied <= 0 {
		return nil
	}
	if _, err := fmt.Fprintf(w, "\n[podvirt: %d bytes of the guest's serial output dropped: it wrote faster than its log was copied]\n", uncopied); err != nil {
		return fmt.Errorf("copy serial log: %w", err)
	}
	return nil
}

// empty truncates the log (qemu appends, so its next write lands at the start) and reads on from there.
func empty(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("rotate serial log: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("rotate serial log: %w", err)
	}
	return nil
}

// rotateDue decides whether to empty the log, given how much of it has been copied and its size now:
// once MaxSerialLog has been copied, at a quiet moment (nothing arrived since the copy, so nothing is
// lost); and once twice that has been copied without one (a guest that writes without pause), at once
// (what arrived since the copy is dropped, and counted).
func rotateDue(copied, size int64) bool {
	return copied >= MaxSerialLog && (size == copied || copied >= 2*MaxSerialLog)
}
