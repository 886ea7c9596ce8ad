package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Down tears the cluster down in the order that leaves nothing behind: pods first (so CNI DEL
// runs), then every process by its PID, kube-proxy's rules, the bridge, network namespaces, host
// mounts, iptables chains and sysctls it created, and finally the state directory. The image cache
// stays. Down on a machine without a cluster does nothing harmful.
func Down(ctx context.Context, c Config, out io.Writer) error {
	if err := Preflight(); err != nil {
		return err
	}
	rec, haveRec := c.readHostRecord()
	step := func(what string) { fmt.Fprintln(out, "down:", what) }
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
			fmt.Fprintln(out, "down: warning:", err)
		}
	}
	// No new pods: stop the controllers and the scheduler before deleting pods.
	for _, n := range []string{compProvisioner, compController, compScheduler} {
		keep(c.stop(ctx, n, 10*time.Second))
	}
	nodes := c.existingNodes()
	if _, ok := c.running(compAPIServer); ok {
		step("deleting all pods and waiting for containerd to have no tasks")
		keep(c.deletePods(ctx, 120*time.Second))
	}
	for _, n := range nodes {
		if _, ok := c.running(n.comp(compKubelet)); ok { // else nothing ends its tasks: killed below
			keep(c.waitNoTasks(ctx, n, 30*time.Second))
		}
	}
	stopping := []string{}
	for _, n := range nodes {
		stopping = append(stopping, n.comp(compKubelet), n.comp(compProxy))
	}
	for _, name := range append(stopping, compDNS, compAPIServer, compEtcd) {
		keep(c.stop(ctx, name, 15*time.Second))
	}
	step("killing leftover containers")
	for _, n := range nodes {
		keep(c.killTasks(ctx, n))
		keep(c.stop(ctx, n.comp(compContainerd), 15*time.Second))
	}
	for _, p := range processesMentioning(c.StateDir) { // containerd shims: -address <our socket>
		keep(killAndWait(ctx, p.pid, 5*time.Second))
	}
	for _, n := range nodes[1:] {
		step("node " + n.name + ": network namespace, cgroups")
		keep(c.removeNodeHost(ctx, n))
	}
	step("network: kube-proxy rules, bridge, netns, iptables chains")
	keep(c.cleanNetwork(ctx, rec, haveRec))
	if haveRec {
		keep(setSysctls(rec.Sysctls))
	}
	step("unmounting and removing " + c.StateDir + " and " + c.KubeletRootDir)
	keep(c.unmountAll())
	keep(os.RemoveAll(c.StateDir))
	if haveRec {
		keep(c.unmountHostPaths(rec))
		for _, p := range rec.CreatedPaths {
			keep(os.RemoveAll(p))
		}
	}
	return errors.Join(errs...)
}

// deletePods deletes every pod with a short grace period and waits until none is left.
func (c Config) deletePods(ctx context.Context, timeout time.Duration) error {
	cs, err := c.clientset()
	if err != nil {
		return err
	}
	grace := int64(1)
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list namespaces: %w", err)
	}
	for _, ns := range nss.Items {
		err := cs.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("delete pods in %s: %w", ns.Name, err)
		}
	}
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		return c.noPodsLeft(ctx, cs)
	})
}

func (c Config) noPodsLeft(ctx context.Context, cs kubernetes.Interface) (bool, error) {
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, nil
	}
	for _, p := range pods.Items {
		if _, ok := c.running(c.nodeNamed(p.Spec.NodeName).comp(compKubelet)); ok {
			return false, nil
		}
		// Without its kubelet nothing finishes the pod's deletion; its tasks are killed below.
	}
	return true, nil
}

// nodeNamed returns the existing node called name (node 1 for an unscheduled pod).
func (c Config) nodeNamed(name string) node {
	for _, n := range c.existingNodes() {
		if n.name == name {
			return n
		}
	}
	return c.node(1)
}

// tasks lists a node's containerd tasks in the k8s.io namespace.
func (c Config) tasks(ctx context.Context, n node) ([]string, error) {
	if _, ok := c.running(n.comp(compContainerd)); !ok {
		return nil, nil
	}
	out, err := run(ctx, "ctr", "-n", "k8s.io", "--address", n.containerdSocket(), "tasks", "ls", "-q")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

func (c Config) waitNoTasks(ctx context.Context, n node, timeout time.Duration) error {
	var left []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		left, err = c.tasks(ctx, n)
		return err == nil && len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("node %s: containerd still has %d tasks: %w", n.name, len(left), err)
	}
	return nil
}

// killTasks kills and deletes whatever tasks a node has left once its kubelet is gone.
func (c Config) killTasks(ctx context.Context, n node) error {
	ids, err := c.tasks(ctx, n)
	if err != nil || len(ids) == 0 {
		return err
	}
	for _, id := range ids {
		_, _ = run(ctx, "ctr", "-n", "k8s.io", "--address", n.containerdSocket(), "tasks", "kill", "-a", "-s", "SIGKILL", id)
	}
	for _, id := range ids {
		_, _ = run(ctx, "ctr", "-n", "k8s.io", "--address", n.containerdSocket(), "tasks", "delete", "-f", id)
	}
	return c.waitNoTasks(ctx, n, 15*time.Second)
}

// cleanNetwork removes kube-proxy's rules, the bridges, the pods' network namespaces and the
// iptables chains that were not there before Up.
func (c Config) cleanNetwork(ctx context.Context, rec hostRecord, haveRec bool) error {
	var errs []error
	if proxy := c.kubeProxyBinary(); proxy != "" {
		if _, err := run(ctx, proxy, "--cleanup"); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, c.deleteNetns(ctx, rec, haveRec))
	for _, br := range []string{c.Bridge, SecondaryBridge} {
		if _, err := run(ctx, "ip", "link", "show", br); err == nil {
			if _, err := run(ctx, "ip", "link", "delete", br); err != nil {
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, deleteChains(ctx, rec.IPTablesChains))
	if rec.NftTables != nil {
		errs = append(errs, deleteEmptyIPTablesTables(ctx, rec.NftTables))
	}
	for _, t := range ourNftTables(ctx) {
		if _, err := run(ctx, "nft", "delete", "table", t); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deleteNetns deletes the first node's pods' network namespaces. A namespace file stays busy while
// a copy of its mount sits beneath a later bind of /run/netns over itself (what `ip netns add`
// made when a node was added to a cluster whose first node already ran pods, before Up made
// /run/netns a mount point of its own): if /run/netns is a mount Up made (the host record says it
// was not one before; without the record nothing is detached), it is detached (with the copies)
// and the rest deleted again.
func (c Config) deleteNetns(ctx context.Context, rec hostRecord, haveRec bool) error {
	deleteAll := func() error {
		var errs []error
		for _, ns := range c.ourNetns() {
			if _, err := run(ctx, "ip", "netns", "delete", ns); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	err := deleteAll()
	if err == nil || !haveRec || !mountPoints()[netnsRunDir] || slices.Contains(rec.MountPoints, netnsRunDir) {
		return err
	}
	if uerr := syscall.Unmount(netnsRunDir, syscall.MNT_DETACH); uerr != nil {
		return errors.Join(err, fmt.Errorf("unmount %s: %w", netnsRunDir, uerr))
	}
	return deleteAll()
}

// kubeProxyBinary finds kube-proxy in the binary cache (kube-proxy --cleanup needs no cluster).
func (c Config) kubeProxyBinary() string {
	matches, _ := filepath.Glob(filepath.Join(c.CacheDir, "bin", "kubernetes-*", "kube-proxy"))
	if len(matches) == 0 {
		return ""
	}
	return matches[len(matches)-1]
}

// ourNetns lists the first node's pods' network namespaces (containerd's CRI names them
// cni-<uuid>; an extra node's live in its own mount namespace).
func (c Config) ourNetns() []string {
	entries, _ := os.ReadDir(netnsRunDir)
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "cni-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// ourChain is true for the chain prefixes the kubelet, kube-proxy and the CNI plugins create.
func ourChain(chain string) bool {
	return strings.HasPrefix(chain, "KUBE-") || strings.HasPrefix(chain, "CNI-")
}

// deleteChains flushes and deletes our iptables and ip6tables chains that were not there before
// (and the rules that jump to them).
func deleteChains(ctx context.Context, before []string) error {
	existed := map[string]bool{}
	for _, ch := range before {
		existed[ch] = true
	}
	now, err := iptablesChains(ctx)
	if err != nil {
		return err
	}
	var doomed [][3]string // bin, table, chain
	for _, ch := range now {
		parts := strings.SplitN(ch, "/", 3)
		if len(parts) == 3 && ourChain(parts[2]) && !existed[ch] {
			doomed = append(doomed, [3]string{parts[0], parts[1], parts[2]})
		}
	}
	// Rules first (they may jump between our chains), then the empty chains.
	for _, d := range doomed {
		_, _ = run(ctx, d[0], "-t", d[1], "-F", d[2])
	}
	var errs []error
	for _, d := range doomed {
		if err := deleteJumps(ctx, d[0], d[1], d[2]); err != nil {
			errs = append(errs, err)
		}
		if _, err := run(ctx, d[0], "-t", d[1], "-X", d[2]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deleteJumps removes the rules of table that jump to chain.
func deleteJumps(ctx context.Context, bin, table, chain string) error {
	out, err := run(ctx, bin, "-t", table, "-S")
	if err != nil {
		return err
	}
	for _, rule := range strings.Split(out, "\n") {
		if !strings.HasPrefix(rule, "-A ") || !strings.Contains(rule, " -j "+chain) {
			continue
		}
		args := append([]string{"-t", table, "-D"}, strings.Fields(strings.TrimPrefix(rule, "-A "))...)
		if _, err := run(ctx, bin, args...); err != nil {
			return err
		}
	}
	return nil
}

// deleteEmptyIPTablesTables removes the iptables-nft tables (ip/ip6 filter, nat, mangle...) that
// did not exist before Up and hold no rule any more.
func deleteEmptyIPTablesTables(ctx context.Context, before []string) error {
	existed := map[string]bool{}
	for _, t := range before {
		existed[t] = true
	}
	now, err := nftTables(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range now {
		family, name, _ := strings.Cut(t, " ")
		bin := map[string]string{"ip": "iptables", "ip6": "ip6tables"}[family]
		if existed[t] || bin == "" || !iptablesTableNames[name] {
			continue
		}
		rules, err := run(ctx, bin, "-t", name, "-S")
		if err != nil || strings.Contains(rules, "-A ") || strings.Contains(rules, "-N ") {
			continue // in use by someone else: keep it
		}
		if _, err := run(ctx, "nft", "delete", "table", family, name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// iptablesTableNames are the tables iptables-nft creates on first use.
var iptablesTableNames = map[string]bool{"filter": true, "nat": true, "mangle": true, "raw": true, "security": true}

// ourNftTables lists nftables tables made for the cluster ("family name").
func ourNftTables(ctx context.Context) []string {
	out, err := run(ctx, "nft", "list", "tables")
	if err != nil {
		return nil
	}
	var tables []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "table" && (f[2] == "kube-proxy" || strings.HasPrefix(f[2], "podvirt")) {
			tables = append(tables, f[1]+" "+f[2])
		}
	}
	return tables
}

// ourMounts lists mount points under the state directory, the kubelet root, the pods' network
// namespaces and containerd's runtime directory, deepest first.
func (c Config) ourMounts() []string {
	prefixes := []string{c.StateDir + "/", c.KubeletRootDir + "/", netnsRunDir + "/cni-", "/run/containerd/"}
	seen := map[string]bool{}
	var out []string
	for _, m := range parseMountinfo(hostMountinfo()) {
		for _, p := range prefixes {
			if (strings.HasPrefix(m.point, p) || m.point+"/" == p) && !seen[m.point] {
				seen[m.point] = true
				out = append(out, m.point)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return strings.Count(out[i], "/") > strings.Count(out[j], "/") })
	return out
}

// mountEntry is one line of a mountinfo file: the filesystem's device (major:minor), the mounted
// directory's path within that filesystem, and where it is mounted.
type mountEntry struct{ dev, root, point string }

// parseMountinfo reads the mounts of a /proc/PID/mountinfo text, in its order.
func parseMountinfo(mountinfo string) []mountEntry {
	var out []mountEntry
	for _, line := range strings.Split(mountinfo, "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			out = append(out, mountEntry{dev: f[2], root: unescapeMount(f[3]), point: unescapeMount(f[4])})
		}
	}
	return out
}

// hostMountinfo is this process's mountinfo ("" if unreadable: no mounts seen).
func hostMountinfo() string {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	return string(data)
}

// unescapeMount decodes the octal escapes of /proc/self/mountinfo (\040 for a space).
func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// unmountHostPaths unmounts the host paths Up found unmounted and that are mount points now (the
// /run/netns that `ip netns add` makes a mount).
func (c Config) unmountHostPaths(rec hostRecord) error {
	was := map[string]bool{}
	for _, p := range rec.MountPoints {
		was[p] = true
	}
	info := hostMountinfo()
	now := pointsOf(info)
	var errs []error
	for _, p := range c.hostPathsWritten() {
		if p == netnsRunDir && foreignNetns(info) {
			continue // another tool's network namespaces are pinned beneath: detaching would unpin them
		}
		if now[p] && !was[p] {
			if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}

// foreignNetns reports whether mountinfo shows a network namespace pinned in /run/netns that is
// not the cluster's (its pods' cni-*, its nodes' podvirt-*).
func foreignNetns(mountinfo string) bool {
	for _, mp := range mountsBeneath(mountinfo, netnsRunDir) {
		name := strings.TrimPrefix(mp, netnsRunDir+"/")
		if mp != netnsRunDir && !strings.HasPrefix(name, "cni-") && !strings.HasPrefix(name, "podvirt-") {
			return true
		}
	}
	return false
}

// mountPoints is the set of the host's mount points.
func mountPoints() map[string]bool { return pointsOf(hostMountinfo()) }

// pointsOf is the set of mountinfo's mount points.
func pointsOf(mountinfo string) map[string]bool {
	out := map[string]bool{}
	for _, m := range parseMountinfo(mountinfo) {
		out[m.point] = true
	}
	return out
}

// unmountAll unmounts our mounts, deepest first; a busy mount is detached.
func (c Config) unmountAll() error {
	var errs []error
	for _, mp := range c.ourMounts() {
		if err := syscall.Unmount(mp, 0); err != nil {
			if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
			}
		}
	}
	return errors.Join(errs...)
}
