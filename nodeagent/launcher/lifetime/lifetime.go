// Package lifetime tells the launcher Pod's helper containers (the guest's console log, the disk
// copies) when the launcher has ended, from the launcher Pod's private directory alone: its exit
// file appears, or its command socket, once seen answering, stops answering (a launcher killed
// without a chance to write the exit file). Pure Go; it never links libvirt.
package lifetime

import (
	"net"
	"os"
	"path/filepath"
	"time"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
)

// socketEvery is how many looks go by between two dials of the command socket (the exit file is
// looked for every time).
const socketEvery = 4

// Tracker follows one launcher. It is not safe for concurrent use.
type Tracker struct {
	exitPath, sockPath string
	looks              int
	seen               bool
}

// New is a Tracker of the launcher whose private directory is privateDir.
func New(privateDir string) *Tracker {
	return &Tracker{exitPath: filepath.Join(privateDir, launcherv1.ExitFile), sockPath: filepath.Join(privateDir, launcherv1.CommandSocket)}
}

// Ended reports whether the launcher has ended; call it once per interval.
func (t *Tracker) Ended() bool {
	if _, err := os.Stat(t.exitPath); err == nil {
		return true
	}
	t.looks++
	if (t.looks-1)%socketEvery != 0 {
		return false
	}
	alive := answers(t.sockPath)
	ended := t.seen && !alive
	t.seen = t.seen || alive
	return ended
}

// Seen reports whether the launcher was ever seen answering, looking once more now if not.
func (t *Tracker) Seen() bool {
	t.seen = t.seen || answers(t.sockPath)
	return t.seen
}

// answers reports whether something accepts connections on the unix socket path.
func answers(path string) bool {
	c, err := net.DialTimeout("unix", path, 200*time.Millisecond)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}
