// Package qemumem reads a process's memory map (/proc/PID/smaps) and sorts qemu's pages into the
// guest's RAM, the TCG translation cache and qemu's own memory. The launcher's real-guest test and
// the node-side benchmark both measure the per-VM overhead with it, so they count the same way.
package qemumem

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Mapping is one entry of /proc/PID/smaps; sizes in bytes.
type Mapping struct {
	Perms, Path     string
	Size, RSS, Anon int64
}

// Files is the resident file-backed part of the mapping (binaries, libraries, firmware).
func (m Mapping) Files() int64 { return m.RSS - m.Anon }

// ReadSmaps reads /proc/PID/smaps.
func ReadSmaps(pid int) ([]Mapping, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return nil, fmt.Errorf("open smaps: %w", err)
	}
	defer f.Close()
	return ParseSmaps(f)
}

// ParseSmaps parses the smaps format.
func ParseSmaps(r io.Reader) ([]Mapping, error) {
	var out []Mapping
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && len(fields[1]) == 4:
			m := Mapping{Perms: fields[1]}
			if len(fields) > 5 {
				m.Path = fields[5]
			}
			out = append(out, m)
		case len(out) == 0 || len(fields) < 3 || fields[2] != "kB":
		case fields[0] == "Size:":
			out[len(out)-1].Size = kib(fields[1])
		case fields[0] == "Rss:":
			out[len(out)-1].RSS = kib(fields[1])
		case fields[0] == "Anonymous:":
			out[len(out)-1].Anon = kib(fields[1])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read smaps: %w", err)
	}
	return out, nil
}

func kib(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n * 1024
}

// Qemu is qemu's memory sorted by what it is for; bytes.
type Qemu struct {
	// GuestTouched is the resident part of the guest RAM mapping (pages the guest used).
	GuestTouched int64
	// TCG is the translation cache: qemu's only writable and executable memory (emulation only).
	TCG int64
	// Own is qemu's other anonymous memory (devices, VGA RAM, heap, user-mode network).
	Own int64
	// Files is the resident file pages qemu maps.
	Files int64
}

// SplitQemu sorts qemu's mappings, given the guest's memory size (qemu's -m). Guest RAM is the
// private read-write anonymous mapping closest above that size (qemu allocates exactly -m; malloc
// arenas leave inaccessible ---p reservations of similar sizes).
func SplitQemu(maps []Mapping, guestBytes int64) (Qemu, error) {
	ram := -1
	for i, m := range maps {
		if m.Path == "" && m.Perms == "rw-p" && m.Size >= guestBytes && m.Size <= guestBytes+4<<20 &&
			(ram < 0 || m.Size < maps[ram].Size) {
			ram = i
		}
	}
	if ram < 0 {
		return Qemu{}, fmt.Errorf("no anonymous rw-p mapping of the guest's %d bytes in qemu's smaps", guestBytes)
	}
	var q Qemu
	for i, m := range maps {
		q.Files += m.Files()
		switch {
		case i == ram:
			q.GuestTouched = m.Anon
		case m.Perms == "rwxp":
			q.TCG += m.Anon
		default:
			q.Own += m.Anon
		}
	}
	return q, nil
}
