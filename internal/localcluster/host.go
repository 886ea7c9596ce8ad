package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
)

// packages are the Debian packages the cluster runs on.
var packages = []string{"containerd", "runc", "containernetworking-plugins", "iptables", "conntrack", "socat", "nftables", "iproute2"}

// aptLock serialises apt-get across every tool of the project (two at once fail on the dpkg lock).
const aptLock = "/var/lib/podvirt-apt.lock"

// Preflight refuses to run anywhere but as root on a Debian-like system.
func Preflight() error {
	if os.Geteuid() != 0 {
		return errors.New("the local cluster must run as root (it starts containerd and kubelet, creates a bridge and mounts)")
	}
	osRelease, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return fmt.Errorf("read /etc/os-release: %w", err)
	}
	for _, line := range strings.Split(string(osRelease), "\n") {
		k, v, _ := strings.Cut(line, "=")
		if (k == "ID" || k == "ID_LIKE") && strings.Contains(strings.Trim(v, `"`), "debian") {
			return nil
		}
	}
	return errors.New("the local cluster needs a Debian-like system (it installs containerd, runc and the CNI plugins with apt-get)")
}

// ensurePackages installs the missing Debian packages (quick when all are present).
func ensurePackages(ctx context.Context) error {
	var missing []string
	for _, p := range packages {
		out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Status}", p).Output()
		if err != nil || !strings.Contains(string(out), "install ok installed") {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := run(ctx, "flock", aptLock, "apt-get", "update", "-qq"); err != nil {
		return fmt.Errorf("apt-get update: %w", err)
	}
	args := append([]string{aptLock, "apt-get", "install", "-y", "-qq", "--no-install-recommends"}, missing...)
	cmd := exec.CommandContext(ctx, "flock", args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get install %s: %w: %s", strings.Join(missing, " "), err, out)
	}
	return nil
}

// hostRecord is what Up found on the host before it changed anything; Down restores it.
type hostRecord struct {
	// CreatedPaths are host directories outside the state directory that did not exist before.
	CreatedPaths []string `json:"createdPaths"`
	// Sysctls maps the sysctls Up set to their original values.
	Sysctls map[string]string `json:"sysctls"`
	// IPTablesChains are the "BIN/table/chain" names that existed before (Down keeps those).
	IPTablesChains []string `json:"iptablesChains"`
	// NftTables are the "family name" nftables tables that existed before.
	NftTables []string `json:"nftTables"`
	// MountPoints are the host paths of hostPathsWritten that were mount points before (Down
	// unmounts the others, e.g. the /run/netns that `ip netns add` mounts).
	MountPoints []string `json:"mountPoints"`
}

// sysctls the cluster needs: routing between the bridge and the host, and bridged traffic through
// netfilter so Service NAT applies between pods on the same bridge.
var sysctls = map[string]string{
	"net/ipv4/ip_forward":                 "1",
	"net/bridge/bridge-nf-call-iptables":  "1",
	"net/bridge/bridge-nf-call-ip6tables": "1",
}

// hostPathsWritten are host paths the kubelet and containerd write whatever their configuration,
// and the parent of the node agent's hostDisk directory (launcherv1.HostDiskRoot).
func (c Config) hostPathsWritten() []string {
	return []string{c.KubeletRootDir, "/var/log/pods", "/var/log/containers", "/var/lib/cni", netnsRunDir, "/run/containerd",
		filepath.Dir(launcherv1.HostDiskRoot)}
}

// netnsRunDir is where ip and containerd pin network namespaces (one of hostPathsWritten).
const netnsRunDir = "/run/netns"

// ensureNetnsRunDir makes /run/netns a shared mount point of its own before any pod runs, as
// `ip netns add` does on its first use. Left to ip, that first use came when a second node was
// added, and by then the first node's pods had their network namespaces mounted there: ip binds
// the directory over itself recursively, stacking a copy over each, and a pod's namespace file
// stayed busy when the pod ended (containerd unmounts the top copy only), so its pods never
// finished terminating and cluster-down failed. Nothing is done when it is a mount point already,
// or has mounts beneath it (a cluster brought up before this: a bind would hide them).
func ensureNetnsRunDir(ctx context.Context) error {
	if len(mountsBeneath(hostMountinfo(), netnsRunDir)) > 0 {
		return nil
	}
	if err := os.MkdirAll(netnsRunDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", netnsRunDir, err)
	}
	if _, err := run(ctx, "mount", "--bind", netnsRunDir, netnsRunDir); err != nil {
		return err
	}
	_, err := run(ctx, "mount", "--make-shared", netnsRunDir)
	return err
}

func (c Config) hostRecordPath() string { return c.path("host.json") }

// recordHost writes the host record once per cluster (a second Up keeps the first record).
func (c Config) recordHost(ctx context.Context) error {
	if exists(c.hostRecordPath()) {
		return nil
	}
	rec := hostRecord{Sysctls: map[string]string{}, NftTables: []string{}}
	mounted := mountPoints()
	for _, p := range c.hostPathsWritten() {
		if !exists(p) {
			rec.CreatedPaths = append(rec.CreatedPaths, p)
		}
		if mounted[p] {
			rec.MountPoints = append(rec.MountPoints, p)
		}
	}
	for k := range sysctls {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return fmt.Errorf("read sysctl %s: %w", k, err)
		}
		rec.Sysctls[k] = strings.TrimSpace(string(v))
	}
	chains, err := iptablesChains(ctx)
	if err != nil {
		return err
	}
	rec.IPTablesChains = chains
	tables, err := nftTables(ctx)
	if err != nil {
		return err
	}
	rec.NftTables = append(rec.NftTables, tables...)
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(c.hostRecordPath(), data, 0o644)
}

func (c Config) readHostRecord() (hostRecord, bool) {
	var rec hostRecord
	data, err := os.ReadFile(c.hostRecordPath())
	if err != nil {
		return rec, false
	}
	return rec, json.Unmarshal(data, &rec) == nil
}

func setSysctls(values map[string]string) error {
	for k, v := range values {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", k, v, err)
		}
	}
	return nil
}

// ensureBridge creates the CNI bridge with the node address before anything starts, so the
// apiserver advertises an address pods reach.
func (c Config) ensureBridge(ctx context.Context) error {
	if _, err := run(ctx, "ip", "link", "show", c.Bridge); err != nil {
		if _, err := run(ctx, "ip", "link", "add", c.Bridge, "type", "bridge"); err != nil {
			return fmt.Errorf("create bridge: %w", err)
		}
	}
	addr := fmt.Sprintf("%s/%d", c.NodeIP, c.PodCIDR.Bits())
	out, err := run(ctx, "ip", "-o", "addr", "show", "dev", c.Bridge)
	if err != nil {
		return err
	}
	if !strings.Contains(out, " "+addr+" ") {
		if _, err := run(ctx, "ip", "addr", "add", addr, "dev", c.Bridge); err != nil {
			return fmt.Errorf("address the bridge: %w", err)
		}
	}
	if _, err := run(ctx, "ip", "link", "set", c.Bridge, "up"); err != nil {
		return fmt.Errorf("bring the bridge up: %w", err)
	}
	return nil
}

// ensureBinaries builds or finds the cached Kubernetes binaries and returns their directory.
func (c Config) ensureBinaries(ctx context.Context, progress io.Writer) (string, error) {
	script := filepath.Join(c.RepoDir, "hack", "kube-binaries.sh")
	cmd := exec.CommandContext(ctx, script)
	cmd.Dir = c.RepoDir
	cmd.Env = append(os.Environ(), "PODVIRT_CACHE="+c.CacheDir)
	cmd.Stderr = progress
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w", script, err)
	}
	dir := strings.TrimSpace(string(out))
	if !exists(filepath.Join(dir, "kube-apiserver")) {
		return "", fmt.Errorf("%s printed %q, which holds no kube-apiserver", script, dir)
	}
	return dir, nil
}

// iptablesBins are the iptables front ends whose chains the kubelet and the CNI plugins create.
var iptablesBins = []string{"iptables", "ip6tables"}

// iptablesChains lists the "BIN/table/chain" names of every iptables and ip6tables table.
func iptablesChains(ctx context.Context) ([]string, error) {
	var chains []string
	for _, bin := range iptablesBins {
		out, err := run(ctx, bin+"-save")
		if err != nil {
			return nil, err
		}
		table := ""
		for _, line := range strings.Split(out, "\n") {
			switch {
			case strings.HasPrefix(line, "*"):
				table = line[1:]
			case strings.HasPrefix(line, ":"):
				chains = append(chains, bin+"/"+table+"/"+strings.Fields(line[1:])[0])
			}
		}
	}
	return chains, nil
}

// nftTables lists the nftables tables as "family name".
func nftTables(ctx context.Context) ([]string, error) {
	out, err := run(ctx, "nft", "list", "tables")
	if err != nil {
		return nil, err
	}
	var tables []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "table" {
			tables = append(tables, f[1]+" "+f[2])
		}
	}
	return tables, nil
}
