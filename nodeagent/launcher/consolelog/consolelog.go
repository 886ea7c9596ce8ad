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

// drain copies to w what the guest wrote since the last look, in passes of at most 2 × MaxSerialLog
// each followed by rotate. When the guest is more than that ahead of the copying (the follower
// starved of CPU, a slow stdout), it drops what it has not copied, saying so in w, rather than let
// the log grow: the log stays under 4 × MaxSerialLog and what arrives during one pass.
func drain(f *os.File, w io.Writer) error {
	for {
		pos, err := f.Seek(0, io.SeekCurrent)
		if err != nil {
			return fmt.Errorf("serial log: %w", err)
		}
		st, err := f.Stat()
		if err != nil {
			return fmt.Errorf("serial log: %w", err)
		}
		if behind := st.Size() - pos; behind > 2*MaxSerialLog {
			if err := empty(f); err != nil {
				return err
			}
			if _, err := fmt.Fprintf(w, "\n[podvirt: %d bytes of the guest's serial output dropped: it wrote faster than its log was copied]\n", behind); err != nil {
				return fmt.Errorf("copy serial log: %w", err)
			}
			continue
		}
		pass := max(2*MaxSerialLog-pos, 0)
		n, err := io.CopyN(w, f, pass)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("copy serial log: %w", err)
		}
		if err := rotate(f); err != nil {
			return err
		}
		if n < pass { // at the end of what the guest wrote
			return nil
		}
	}
}

// rotate empties the log when rotateDue says so. What the guest writes between Follow's last read and
// the truncation (microseconds) is lost: nothing when the guest was quiet, a few bytes of a flood.
func rotate(f *os.File) error {
	pos, err := f.Seek(0, io.SeekCurrent)
	if err != nil || pos < MaxSerialLog {
		return err
	}
	st, err := f.Stat()
	if err != nil || !rotateDue(pos, st.Size()) {
		return err
	}
	return empty(f)
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
// lost); and once twice that has been copied without one (a guest that writes without pause), at once,
// so the log stays under 2 × MaxSerialLog and what arrives in one interval.
func rotateDue(copied, size int64) bool {
	return copied >= MaxSerialLog && (size == copied || copied >= 2*MaxSerialLog)
}
