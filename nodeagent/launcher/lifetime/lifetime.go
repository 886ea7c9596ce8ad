// Package lifetime tells the launcher Pod's helper containers (the guest's console log, the disk
// copies) when the launcher has ended, from the launcher Pod's private directory alone: its exit
// file appears, or its command socket, once seen answering, has no listener at two dials in a row
// (a launcher killed without a chance to write the exit file; a dial that times out says nothing:
// the helper may be starved of CPU on a loaded node). Pure Go; it never links libvirt.
package lifetime

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
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
	// gone counts the dials in a row that found no listener (refused, or no socket file).
	gone int
}

// goneDials is how many dials in a row must find no listener before the launcher counts as ended:
// one dial can fail on a loaded node for other reasons.
const goneDials = 2

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
	switch dial(t.sockPath) {
	case listening:
		t.seen, t.gone = true, 0
	case noListener:
		t.gone++
	}
	return t.seen && t.gone >= goneDials
}

// Seen reports whether the launcher was ever seen answering, looking once more now if not.
func (t *Tracker) Seen() bool {
	t.seen = t.seen || dial(t.sockPath) == listening
	return t.seen
}

type dialResult int

const (
	listening  dialResult = iota
	noListener            // refused, or no socket file: the launcher's listener is gone
	unknown               // a timeout, a full backlog…: says nothing (a helper starved of CPU on a loaded node)
)

// dial tries to connect to the unix socket path.
func dial(path string) dialResult {
	c, err := net.DialTimeout("unix", path, time.Second)
	switch {
	case err == nil:
		_ = c.Close()
		return listening
	case errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, fs.ErrNotExist):
		return noListener
	}
	return unknown
}
