package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// MaxNodes bounds Config.Nodes: node addresses are the bridge's .1 to .8, below the first pod
// address (.10).
const MaxNodes = 8

// node is one kubelet with its own containerd and kube-proxy. The first node is the host itself.
// Every further node lives in its own network namespace (a veth on the cluster bridge with the
// node's address, its pods on a bridge of their own behind it), its own mount namespace (the
// kubelet root, pod logs, CNI state, containerd's runtime directory and the node agent's host
// directory bound over the host's from the node's state directory) and its own cgroup parent, so
// two kubelets on one machine never see each other's pods, device plugins or containers.
type node struct {
	index   int
	name    string
	ip      netip.Addr   // on the cluster bridge: InternalIP, kubelet and node-agent address
	podCIDR netip.Prefix // the node's pods, on its own bridge
	dir     string       // the node's containerd, CNI and kubelet configuration and state
}

// node returns node i (1-based); node 1 is the host.
func (c Config) node(i int) node {
	if i == 1 {
		return node{index: 1, name: c.NodeName, ip: c.NodeIP, podCIDR: c.PodCIDR, dir: c.StateDir}
	}
	// Node i's pods take the /16 i above the first node's (the Service range sits at +1).
	a := c.PodCIDR.Addr().As4()
	a[1] += byte(i)
	id := "n" + strconv.Itoa(i)
	return node{
		index:   i,
		name:    c.NodeName + "-" + strconv.Itoa(i),
		ip:      addrPlus(c.NodeIP, i-1),
		podCIDR: netip.PrefixFrom(netip.AddrFrom4(a), c.PodCIDR.Bits()),
		dir:     c.path("nodes", id),
	}
}

// nodes are the nodes Up brings up.
func (c Config) nodes() []node {
	out := []node{c.node(1)}
	for i := 2; i <= c.Nodes; i++ {
		out = append(out, c.node(i))
	}
	return out
}

// existingNodes are node 1 and every further node that has a state directory (what Down, Status
// and image syncs act on, whatever Nodes says).
func (c Config) existingNodes() []node {
	out := []node{c.node(1)}
	entries, _ := os.ReadDir(c.path("nodes"))
	var idx []int
	for _, e := range entries {
		if i, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "n")); err == nil && i > 1 && i <= MaxNodes {
			idx = append(idx, i)
		}
	}
	sort.Ints(idx)
	for _, i := range idx {
		out = append(out, c.node(i))
	}
	return out
}

// validateNodes refuses a node count the address plan cannot hold.
func (c Config) validateNodes() error {
	if c.Nodes < 1 || c.Nodes > MaxNodes {
		return fmt.Errorf("--nodes %d: must be between 1 and %d", c.Nodes, MaxNodes)
	}
	for _, n := range c.nodes() {
		if n.podCIDR.Overlaps(c.ServiceCIDR) {
			return fmt.Errorf("node %s's pod network %s overlaps the Service range %s", n.name, n.podCIDR, c.ServiceCIDR)
		}
	}
	return nil
}

// extra is true for every node but the host's own.
func (n node) extra() bool { return n.index > 1 }

// id names the node's network namespace, host veth and cgroup parent ("n2"); empty for node 1.
func (n node) id() string {
	if !n.extra() {
		return ""
	}
	return "n" + strconv.Itoa(n.index)
}

// netns is the node's network namespace under /run/netns; its host-side veth has the same name.
func (n node) netns() string { return "podvirt-" + n.id() }

// cgroupParent is the kubelet's cgroupRoot of an extra node.
func (n node) cgroupParent() string { return "/podvirt-" + n.id() }

// mntns is the file the node's mount namespace is pinned to.
func (n node) mntns() string { return filepath.Join(n.dir, "ns", "mnt") }

// comp names a per-node component: "kubelet" on node 1, "kubelet-n2" on node 2.
func (n node) comp(base string) string {
	if !n.extra() {
		return base
	}
	return base + "-" + n.id()
}

// gateway is the pods' default gateway: the node's address on its pod bridge.
func (n node) gateway() netip.Addr {
	if !n.extra() {
		return n.ip
	}
	return n.podCIDR.Addr().Next()
}

// containerdSocket is the node's containerd socket (images are imported through it).
func (n node) containerdSocket() string { return filepath.Join(n.dir, "containerd", "containerd.sock") }

// cniConfDir holds the node's CNI configuration.
func (n node) cniConfDir() string { return filepath.Join(n.dir, "cni", "net.d") }

// cniConfList is the node's own CNI network (the bridge), in cniConfDir.
func (n node) cniConfList() string { return filepath.Join(n.cniConfDir(), "10-podvirt.conflist") }

// hostBinds are the host paths an extra node sees bound from its own state directory: those the
// kubelet, containerd and the CNI plugins write whatever their configuration, and the node agent's.
func (c Config) hostBinds(n node) map[string]string {
	binds := map[string]string{}
	for _, p := range c.hostPathsWritten() {
		binds[p] = filepath.Join(n.dir, "host", p)
	}
	return binds
}

// ensureNodeHost gives an extra node its network namespace, veth, routes, mount namespace and
// cgroup parent (each step skipped when already done).
func (c Config) ensureNodeHost(ctx context.Context, n node) error {
	if err := c.ensureNodeNetwork(ctx, n); err != nil {
		return fmt.Errorf("node %s network: %w", n.name, err)
	}
	if err := c.ensureNodeMounts(ctx, n); err != nil {
		return fmt.Errorf("node %s mount namespace: %w", n.name, err)
	}
	for _, root := range cgroupHierarchies() {
		if err := os.MkdirAll(filepath.Join(root, n.cgroupParent()), 0o755); err != nil {
			return fmt.Errorf("node %s cgroup: %w", n.name, err)
		}
	}
	return nil
}

// ensureNodeNetwork gives an extra node its network namespace, a veth from the cluster bridge into
// it with the node's address, its routes and sysctls. Every step but creating the namespace and the
// veth is repeated on each Up, so that a half-made node is completed.
func (c Config) ensureNodeNetwork(ctx context.Context, n node) error {
	ns := n.netns()
	if !exists(filepath.Join(netnsRunDir, ns)) {
		if _, err := run(ctx, "ip", "netns", "add", ns); err != nil {
			return err
		}
	}
	if _, err := run(ctx, "ip", "-n", ns, "link", "show", "eth0"); err != nil {
		_, _ = run(ctx, "ip", "link", "delete", ns) // a host end left without its peer
		if _, err := run(ctx, "ip", "link", "add", ns, "type", "veth", "peer", "name", "eth0", "netns", ns); err != nil {
			return err
		}
	}
	steps := [][]string{
		{"ip", "link", "set", ns, "master", c.Bridge, "up"},
		{"ip", "-n", ns, "addr", "replace", fmt.Sprintf("%s/%d", n.ip, c.PodCIDR.Bits()), "dev", "eth0"},
		{"ip", "-n", ns, "link", "set", "eth0", "up"},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
		{"ip", "-n", ns, "route", "replace", "default", "via", c.NodeIP.String()},
		// The host reaches the node's pods through the node.
		{"ip", "route", "replace", n.podCIDR.String(), "via", n.ip.String(), "dev", c.Bridge},
		// Forwarding between the node's pod bridge and its veth, and Service NAT on bridged traffic.
		{"ip", "netns", "exec", ns, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward && echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables"},
	}
	for _, s := range steps {
		if _, err := run(ctx, s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// ensureNodeMounts pins a private mount namespace for the node to a file and binds the node's own
// directories over the host paths its kubelet and containerd write. A bind already in place is
// kept; a missing one (an earlier Up stopped half-way) is made.
func (c Config) ensureNodeMounts(ctx context.Context, n node) error {
	nsDir := filepath.Dir(n.mntns())
	mounted := map[string]bool{}
	for _, mp := range c.ourMounts() {
		mounted[mp] = true
	}
	if !mounted[n.mntns()] {
		if err := pinMountNamespace(ctx, nsDir, n.mntns(), mounted[nsDir]); err != nil {
			return err
		}
	}
	inNode, err := run(ctx, "nsenter", "--mount="+n.mntns(), "cat", "/proc/self/mountinfo")
	if err != nil {
		return err
	}
	binds := c.hostBinds(n)
	targets := make([]string, 0, len(binds))
	for t := range binds {
		targets = append(targets, t)
	}
	sort.Strings(targets)
	for _, target := range targets {
		if boundIn(inNode, binds[target], target) {
			continue
		}
		if err := bindInto(ctx, n.mntns(), binds[target], target); err != nil {
			return err
		}
	}
	return nil
}

// pinMountNamespace creates a private mount namespace pinned to file, in dir (which must be a mount
// with private propagation: it is bound onto itself unless dirMounted).
func pinMountNamespace(ctx context.Context, dir, file string, dirMounted bool) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if !dirMounted {
		if _, err := run(ctx, "mount", "--bind", dir, dir); err != nil {
			return err
		}
	}
	if _, err := run(ctx, "mount", "--make-private", dir); err != nil {
		return err
	}
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		return fmt.Errorf("create %s: %w", file, err)
	}
	_, err := run(ctx, "unshare", "--mount="+file, "--propagation", "private", "true")
	return err
}

// boundIn reports whether mountinfo (of the node's mount namespace) shows source bound at target:
// a mount at target of the filesystem holding source, rooted at source's own path within it. A
// copy of the host's mount at target does not count, even when its root (the host kubelet binds
// /var/lib/kubelet over itself) is a suffix of source.
func boundIn(mountinfo, source, target string) bool {
	mounts := parseMountinfo(mountinfo)
	dev, root, ok := pathInFilesystem(mounts, source)
	if !ok {
		return false
	}
	for _, m := range mounts {
		if m.point == target && m.dev == dev && m.root == root {
			return true
		}
	}
	return false
}

// pathInFilesystem finds the mount holding path (the longest mount point above it; the last
// listed, the top of a stack, among equals) and returns its device and path's location within
// that filesystem.
func pathInFilesystem(mounts []mountEntry, path string) (dev, root string, ok bool) {
	best := -1
	for _, m := range mounts {
		rel, err := filepath.Rel(m.point, path)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || len(m.point) < best {
			continue
		}
		best, dev, root, ok = len(m.point), m.dev, filepath.Join(m.root, rel), true
	}
	return dev, root, ok
}

// bindInto binds source at target inside the mount namespace pinned at mntns, as the only mount
// there and shared: containerd checks the propagation of the first mount listed at a path (a copy
// of the host's mount under ours would fail HostToContainer volumes), and the kubelet stacks a
// shared bind of its root dir over a private one.
func bindInto(ctx context.Context, mntns, source, target string) error {
	for _, d := range []string{target, source} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	if err := unmountCopies(ctx, mntns, target); err != nil {
		return err
	}
	if _, err := run(ctx, "nsenter", "--mount="+mntns, "mount", "--bind", source, target); err != nil {
		return err
	}
	_, err := run(ctx, "nsenter", "--mount="+mntns, "mount", "--make-rshared", target)
	return err
}

// maxUnmountPasses bounds the passes unmountCopies makes over a namespace's mounts.
const maxUnmountPasses = 16

// unmountCopies takes every mount at or beneath target out of the mount namespace pinned at mntns:
// the copies of the host's that the namespace was made with. A first node already running has
// pods, so the copies include their volumes and network namespaces, and kubelet's bind of its root
// dir over itself (stacked: umount -R takes one layer at a time). Left beneath the node's bind, a
// copy keeps the host's file busy: a network namespace file mounted in another namespace cannot be
// removed, so the first node's pods never finished terminating and cluster-down failed.
func unmountCopies(ctx context.Context, mntns, target string) error {
	var left []string
	for i := 0; i < maxUnmountPasses; i++ {
		info, err := run(ctx, "nsenter", "--mount="+mntns, "cat", "/proc/self/mountinfo")
		if err != nil {
			return err
		}
		if left = mountsBeneath(info, target); len(left) == 0 {
			return nil
		}
		for _, mp := range left { // outermost first: -R takes the ones beneath with it
			_, _ = run(ctx, "nsenter", "--mount="+mntns, "umount", "-R", mp) // "not mounted" once its parent went
		}
	}
	return fmt.Errorf("mounts at or beneath %s are left in %s after %d passes: %s", target, mntns, maxUnmountPasses, strings.Join(left, ", "))
}

// mountsBeneath lists the distinct mount points of mountinfo at or beneath dir, outermost first.
func mountsBeneath(mountinfo, dir string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range parseMountinfo(mountinfo) {
		if (m.point == dir || strings.HasPrefix(m.point, dir+"/")) && !seen[m.point] {
			seen[m.point] = true
			out = append(out, m.point)
		}
	}
	sort.Slice(out, func(i, j int) bool { return strings.Count(out[i], "/") < strings.Count(out[j], "/") })
	return out
}

// removeNodeHost deletes what ensureNodeHost made outside the state directory once the node's
// processes are gone: the network namespace (and with it the veth) and the cgroup parent. The
// mount namespace goes when Down unmounts everything under the state directory.
func (c Config) removeNodeHost(ctx context.Context, n node) error {
	var errs []error
	if _, err := run(ctx, "ip", "link", "show", n.netns()); err == nil {
		if _, err := run(ctx, "ip", "link", "delete", n.netns()); err != nil { // the veth's host end
			errs = append(errs, err)
		}
	}
	if exists(filepath.Join(netnsRunDir, n.netns())) {
		if _, err := run(ctx, "ip", "netns", "delete", n.netns()); err != nil {
			errs = append(errs, err)
		}
	}
	for _, root := range cgroupHierarchies() {
		errs = append(errs, removeCgroupTree(filepath.Join(root, n.cgroupParent())))
	}
	return errors.Join(errs...)
}

// cgroupHierarchies lists the mounted cgroup hierarchies (the v1 controllers and the unified one).
func cgroupHierarchies() []string {
	if exists("/sys/fs/cgroup/cgroup.controllers") {
		return []string{"/sys/fs/cgroup"} // cgroup v2 only
	}
	var out []string
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if e.IsDir() && exists(filepath.Join(p, "cgroup.procs")) {
			out = append(out, p)
		}
	}
	return out
}

// removeCgroupTree removes a cgroup and its children, deepest first (cgroups are removed with
// rmdir, and only once empty of processes).
func removeCgroupTree(root string) error {
	if !exists(root) {
		return nil
	}
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	var errs []error
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// nodeLeftovers lists extra nodes' network namespaces and cgroup parents still on the host.
func nodeLeftovers() []string {
	var left []string
	entries, _ := os.ReadDir(netnsRunDir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "podvirt-") {
			left = append(left, "netns "+e.Name())
		}
	}
	for _, root := range cgroupHierarchies() {
		matches, _ := filepath.Glob(filepath.Join(root, "podvirt-n*"))
		for _, m := range matches {
			left = append(left, "cgroup "+m)
		}
	}
	return left
}

// StopNode kills a node's kubelet and kube-proxy at once (SIGKILL), as a node that lost power or its
// network stops answering: its containers keep running, nothing on it reaches the control plane
// through the kubelet any more. Up starts them again.
func StopNode(ctx context.Context, c Config, name string, out io.Writer) error {
	var names []string
	for _, n := range c.existingNodes() {
		names = append(names, n.name)
		if n.name != name {
			continue
		}
		for _, comp := range []string{n.comp(compKubelet), n.comp(compProxy)} {
			if err := c.kill(ctx, comp, out); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("no node %q (nodes: %s)", name, strings.Join(names, ", "))
}

// CutNode takes an extra node's link on the cluster bridge down: the node, its kubelet, agent and
// guests keep running but reach neither the control plane nor the other nodes, as a partitioned
// node does. HealNode (or Up) brings the link up again. The host, node 1, cannot be cut off.
func CutNode(ctx context.Context, c Config, name string, out io.Writer) error {
	return c.setLink(ctx, name, "down", out)
}

// HealNode brings a node CutNode cut off back onto the cluster bridge.
func HealNode(ctx context.Context, c Config, name string, out io.Writer) error {
	return c.setLink(ctx, name, "up", out)
}

func (c Config) setLink(ctx context.Context, name, state string, out io.Writer) error {
	var names []string
	for _, n := range c.existingNodes() {
		names = append(names, n.name)
		if n.name != name {
			continue
		}
		if n.index == 1 {
			return fmt.Errorf("node %s is the host: only an extra node has a link of its own to cut", name)
		}
		if _, err := run(ctx, "ip", "link", "set", n.netns(), state); err != nil {
			return err
		}
		fmt.Fprintf(out, "node %s: link %s %s\n", name, n.netns(), state)
		return nil
	}
	return fmt.Errorf("no node %q (nodes: %s)", name, strings.Join(names, ", "))
}

// StopAPIServer kills the kube-apiserver, as a control-plane outage begins (etcd and everything
// else keep running); Up starts it again.
func StopAPIServer(ctx context.Context, c Config, out io.Writer) error {
	return c.kill(ctx, compAPIServer, out)
}

// kill sends SIGKILL to a running component and waits (at most 10 s) until it is gone.
func (c Config) kill(ctx context.Context, comp string, out io.Writer) error {
	pid, ok := c.running(comp)
	if !ok {
		fmt.Fprintf(out, "%s is not running\n", comp)
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %s (pid %d): %w", comp, pid, err)
	}
	gone := func(context.Context) (bool, error) { return !processAlive(pid), nil }
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, gone); err != nil {
		return fmt.Errorf("%s (pid %d) did not die: %w", comp, pid, err)
	}
	fmt.Fprintf(out, "killed %s (pid %d)\n", comp, pid)
	return nil
}
