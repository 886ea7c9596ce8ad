//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// qemuSampler counts the qemu processes of every VM of one namespace on this machine (every node of
// the local cluster is on it) every 100 ms, across nodes: the most copies of each VM seen at once,
// every guest that ended (its qemu gone) with when, and the longest gap between two samples (an
// overlap shorter than that could go unseen).
type qemuSampler struct {
	name *regexp.Regexp

	mu      sync.Mutex
	running map[string]map[int]bool // VM → qemu PIDs
	most    map[string]int
	ended   []guestEnd
	samples int
	last    time.Time
	gap     time.Duration

	quit, done chan struct{}
}

// guestEnd is one qemu of a VM seen gone.
type guestEnd struct {
	vm  string
	pid int
	at  time.Time
}

func sampleQemus(ns string) *qemuSampler {
	s := &qemuSampler{
		name:    regexp.MustCompile(`guest=` + regexp.QuoteMeta(ns) + `_([a-z0-9-]+),`),
		running: map[string]map[int]bool{}, most: map[string]int{},
		quit: make(chan struct{}), done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			s.sample()
			select {
			case <-s.quit:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *qemuSampler) sample() {
	now := map[string]map[int]bool{}
	paths, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, p := range paths {
		if comm, err := os.ReadFile(p); err != nil || !bytes.HasPrefix(comm, []byte("qemu-system")) {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		m := s.name.FindSubmatch(raw)
		if err != nil || m == nil {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		vm := string(m[1])
		if now[vm] == nil {
			now[vm] = map[int]bool{}
		}
		now[vm][pid] = true
	}
	at := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for vm, pids := range s.running {
		for pid := range pids {
			switch {
			case now[vm][pid]:
			case isQemu(pid): // the scan missed it (a read that failed): it still runs
				if now[vm] == nil {
					now[vm] = map[int]bool{}
				}
				now[vm][pid] = true
			default:
				s.ended = append(s.ended, guestEnd{vm: vm, pid: pid, at: at})
			}
		}
	}
	for vm, pids := range now {
		s.most[vm] = max(s.most[vm], len(pids))
	}
	if !s.last.IsZero() {
		s.gap = max(s.gap, at.Sub(s.last))
	}
	s.running, s.last = now, at
	s.samples++
}

// isQemu tells whether pid is a qemu process now.
func isQemu(pid int) bool {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return err == nil && bytes.HasPrefix(comm, []byte("qemu-system"))
}

// pids are the qemu PIDs of vm now.
func (s *qemuSampler) pids(vm string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for pid := range s.running[vm] {
		out = append(out, pid)
	}
	return out
}

// count is how many qemus of vm run now.
func (s *qemuSampler) count(vm string) int { return len(s.pids(vm)) }

// stop ends the sampling (once).
func (s *qemuSampler) stop() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	<-s.done
}

// sampled is what the sampler saw so far.
type sampled struct {
	most    map[string]int // VM → the most qemus at once
	ended   []guestEnd
	samples int
	gap     time.Duration
}

func (s *qemuSampler) results() sampled {
	s.mu.Lock()
	defer s.mu.Unlock()
	most := make(map[string]int, len(s.most))
	for k, v := range s.most {
		most[k] = v
	}
	return sampled{most: most, ended: append([]guestEnd(nil), s.ended...), samples: s.samples, gap: s.gap}
}

// recordsUserData makes the guest append a numbered, checksummed record once a second to its disk
// with serial "data" (raw: record n is the 64 bytes at (n-1)×64, "%08d BOOT CHECKSUM", BOOT the
// first 8 characters of the guest's boot id, CHECKSUM the first 16 hex digits of the sha256 of
// "%08d BOOT"), each synced before the next, resuming after the records on the disk at every boot.
// /cgi-bin/records answers "N BOOT": the last record this boot synced.
const recordsUserData = `#!/bin/sh
for b in /sys/block/vd*; do [ "$(cat $b/serial 2>/dev/null)" = data ] && dev=/dev/${b##*/}; done
[ -n "$dev" ] || { echo "records: no data disk"; exit 1; }
boot=$(cut -c1-8 /proc/sys/kernel/random/boot_id)
n=$(dd if=$dev bs=64 count=16384 2>/dev/null | tr -d '\000' | grep -c '^[0-9]\{8\} ')
echo "0 $boot" > /run/records
printf '#!/bin/sh\necho Content-Type: text/plain\necho\ncat /run/records\n' > /var/www/cgi-bin/records
chmod 755 /var/www/cgi-bin/records
echo "records: resuming after $n"
(while [ $n -lt 16384 ]; do
  n=$((n+1))
  body=$(printf '%08d %s' $n $boot)
  sum=$(printf '%s' "$body" | sha256sum | cut -c1-16)
  printf '%-63s\n' "$body $sum" | dd of=$dev bs=64 seek=$((n-1)) conv=notrunc,fsync 2>/dev/null && echo "$n $boot" > /run/records
  sleep 1
done) </dev/null >/dev/null 2>&1 &
`

// recordSize is the size of one record of recordsUserData.
const recordSize = 64

// guestRecords asks a records guest for the last record it synced and the boot that wrote it.
func guestRecords(ctx context.Context, ip string) (int, string, error) {
	body, err := guestCGI(ctx, ip, "records")
	if err != nil {
		return 0, "", err
	}
	fields := strings.Fields(body)
	if len(fields) != 2 {
		return 0, "", fmt.Errorf("records: %q, want N BOOT", body)
	}
	n, err := strconv.Atoi(fields[0])
	return n, fields[1], err
}

// recordCheck is what a records disk holds, read up to the first empty slot: the whole records, the
// torn or misnumbered ones among them, the last record each boot wrote, and how often a boot wrote
// again after another boot had (two guests writing at once).
type recordCheck struct {
	valid, corrupt int
	lastOf         map[string]int
	interleaved    int
}

// checkRecords reads the records of a disk image (the claim's disk.img, read on this machine).
func checkRecords(image string) (recordCheck, error) {
	f, err := os.Open(image)
	if err != nil {
		return recordCheck{}, err
	}
	defer f.Close()
	c := recordCheck{lastOf: map[string]int{}}
	current := ""
	buf := make([]byte, recordSize)
	for n := 1; n <= 16384; n++ {
		if _, err := io.ReadFull(f, buf); err != nil || buf[0] == 0 {
			break
		}
		fields := strings.Fields(string(buf))
		if len(fields) != 3 || fields[0] != fmt.Sprintf("%08d", n) {
			c.corrupt++
			continue
		}
		sum := sha256.Sum256([]byte(fields[0] + " " + fields[1]))
		if hex.EncodeToString(sum[:])[:16] != fields[2] {
			c.corrupt++
			continue
		}
		c.valid++
		if boot := fields[1]; boot != current {
			if _, seen := c.lastOf[boot]; seen {
				c.interleaved++
			}
			current = boot
		}
		c.lastOf[current] = n
	}
	return c, nil
}
