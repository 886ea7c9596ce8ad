//go:build bench

package bench

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/podvirt/podvirt/internal/qemumem"
)

// memoryCgroupRoot is where the cgroup v1 memory controller is mounted (the local cluster's
// kubelet uses the cgroupfs driver: kubepods/<qos>/pod<uid>/<container>).
const memoryCgroupRoot = "/sys/fs/cgroup/memory"

// memorySample is one launcher Pod's memory, in bytes: the Pod cgroup's own accounting and, from
// /proc/PID/smaps of every process in it, what the pages are.
type memorySample struct {
	// From the Pod's cgroup (memory.usage_in_bytes, memory.stat total_*).
	usage, rss, cache, mappedFile, inactiveFile int64
	// From smaps. guestAllotted is qemu's -m; guestTouched the anonymous pages of the guest RAM
	// mapping; tcg the anonymous pages of the only writable+executable mappings (TCG's
	// code_gen_buffer); qemuOther qemu's other anonymous pages; qemuFile the file pages qemu maps;
	// restAnon the anonymous pages of every other process of the Pod (launcher, its PID 1 init,
	// console-log, pause).
	guestAllotted, guestTouched, tcg, qemuOther, qemuFile, restAnon int64
	// filesOnce is the resident file pages mapped by the Pod's processes, each file counted once
	// (libraries shared by qemu and the launcher too). In cgroup v1 a page is charged to the cgroup
	// that first touched it, so these are often charged to another Pod (or none left).
	filesOnce int64
	procs     int
}

// workingSet is the kubelet's figure (what `kubectl top` shows): usage minus inactive file pages.
func (m memorySample) workingSet() int64 { return m.usage - m.inactiveFile }

// fixedOverhead is the Pod's working set beyond the guest RAM the guest touched and the translation
// cache: what the Pod costs beyond its guest when emulation's own cache is set aside.
func (m memorySample) fixedOverhead() int64 { return m.workingSet() - m.guestTouched - m.tcg }

// soleOverhead is fixedOverhead plus the mapped file pages charged to another cgroup: what the
// Pod would cost on a node where it is the only one using the launcher image.
func (m memorySample) soleOverhead() int64 {
	return m.fixedOverhead() + max(0, m.filesOnce-m.mappedFile)
}

// readCgroupMemory reads the cgroup's own accounting (usage and memory.stat).
func readCgroupMemory(dir string) (memorySample, error) {
	var m memorySample
	usage, err := os.ReadFile(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		return m, fmt.Errorf("read pod memory usage: %w", err)
	}
	if m.usage, err = strconv.ParseInt(strings.TrimSpace(string(usage)), 10, 64); err != nil {
		return m, fmt.Errorf("parse %s/memory.usage_in_bytes: %w", dir, err)
	}
	stat, err := readKeyValues(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return m, err
	}
	m.rss, m.cache, m.mappedFile, m.inactiveFile = stat["total_rss"], stat["total_cache"], stat["total_mapped_file"], stat["total_inactive_file"]
	return m, nil
}

// cgroupWorkingSet is the working set of the Pod cgroup dir (any Pod, not only a launcher's).
func cgroupWorkingSet(dir string) (int64, error) {
	m, err := readCgroupMemory(dir)
	return m.workingSet(), err
}

// podMemoryCgroup finds the memory cgroup of the Pod with uid.
func podMemoryCgroup(uid string) (string, error) {
	for _, pattern := range []string{"kubepods/pod" + uid, "kubepods/*/pod" + uid} {
		dirs, err := filepath.Glob(filepath.Join(memoryCgroupRoot, pattern))
		if err != nil {
			return "", fmt.Errorf("glob %s: %w", pattern, err)
		}
		if len(dirs) == 1 {
			return dirs[0], nil
		}
	}
	return "", fmt.Errorf("no memory cgroup %s/kubepods[/<qos>]/pod%s (cgroup v1 with the cgroupfs driver expected)", memoryCgroupRoot, uid)
}

// readPodMemory reads the memory of the Pod whose memory cgroup is dir.
func readPodMemory(dir string) (memorySample, error) {
	m, err := readCgroupMemory(dir)
	if err != nil {
		return m, err
	}
	pids, err := cgroupPIDs(dir)
	if err != nil {
		return m, err
	}
	m.procs = len(pids)
	foundQemu := false
	files := map[string]int64{}
	for _, pid := range pids {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			return m, fmt.Errorf("read comm of pid %d: %w", pid, err)
		}
		maps, err := qemumem.ReadSmaps(pid)
		if err != nil {
			return m, err
		}
		for _, mp := range maps {
			if strings.HasPrefix(mp.Path, "/") {
				files[mp.Path] = max(files[mp.Path], mp.Files())
			}
		}
		if !strings.HasPrefix(string(comm), "qemu-system") {
			for _, mp := range maps {
				m.restAnon += mp.Anon
			}
			continue
		}
		if foundQemu {
			return m, fmt.Errorf("two qemu processes in %s", dir)
		}
		foundQemu = true
		if err := m.splitQemu(pid, maps); err != nil {
			return m, err
		}
	}
	if !foundQemu {
		return m, fmt.Errorf("no qemu process in %s (%d processes)", dir, len(pids))
	}
	for _, b := range files {
		m.filesOnce += b
	}
	return m, nil
}

// splitQemu sorts qemu's pages (qemumem.SplitQemu) for the guest size on its command line.
func (m *memorySample) splitQemu(pid int, maps []qemumem.Mapping) error {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return fmt.Errorf("read qemu cmdline: %w", err)
	}
	if m.guestAllotted, err = qemuMemory(strings.Split(string(cmdline), "\x00")); err != nil {
		return err
	}
	q, err := qemumem.SplitQemu(maps, m.guestAllotted)
	if err != nil {
		return fmt.Errorf("qemu pid %d: %w", pid, err)
	}
	m.guestTouched, m.tcg, m.qemuOther, m.qemuFile = q.GuestTouched, q.TCG, q.Own, q.Files
	return nil
}

// qemuMemory is the guest memory of a qemu command line's -m ("62", "size=63488k", "62M").
func qemuMemory(args []string) (int64, error) {
	for i, a := range args {
		if a != "-m" || i+1 == len(args) {
			continue
		}
		v, _, _ := strings.Cut(strings.TrimPrefix(args[i+1], "size="), ",")
		unit := int64(1 << 20)
		switch {
		case strings.HasSuffix(v, "k") || strings.HasSuffix(v, "K"):
			unit, v = 1<<10, v[:len(v)-1]
		case strings.HasSuffix(v, "M"):
			v = v[:len(v)-1]
		case strings.HasSuffix(v, "G"):
			unit, v = 1<<30, v[:len(v)-1]
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("qemu -m %q: %w", args[i+1], err)
		}
		return n * unit, nil
	}
	return 0, fmt.Errorf("no -m in qemu's command line %q", strings.Join(args, " "))
}

// cgroupPIDs lists the processes of dir and every cgroup below it.
func cgroupPIDs(dir string) ([]int, error) {
	var pids []int
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "cgroup.procs" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		for _, f := range strings.Fields(string(data)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				return fmt.Errorf("parse %s: %w", path, err)
			}
			pids = append(pids, pid)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list processes of %s: %w", dir, err)
	}
	return pids, nil
}

func readKeyValues(path string) (map[string]int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("parse %s line %q: %w", path, line, err)
		}
		out[k] = n
	}
	return out, nil
}
