package localcluster

import (
	"strings"
	"testing"
)

// The settings local-cluster.md found REQUIRED on these machines must stay in the rendered configs.
func TestRenderedConfigsKeepRequiredSettings(t *testing.T) {
	c := DefaultConfig()
	c.NodeName = "node1"
	n := c.node(1)
	checks := map[string][]string{
		"containerd": {c.containerdConfig(n), "restrict_oom_score_adj = true", "SystemdCgroup = false", `sandbox_image = "` + PauseImage + `"`, `bin_dir = "` + c.cniBinDir() + `"`, "device_ownership_from_security_context = true", c.ContainerdSocket()},
		"kubelet":    {c.kubeletConfig(n), "cgroupDriver: cgroupfs", "failCgroupV1: false", "failSwapOn: false", "address: 10.218.0.1"},
		"kube-proxy": {c.kubeProxyConfig(n), "mode: nftables", "hostnameOverride: node1"},
		"cni":        {c.cniConfig(n), `"bridge": "podvirt-br0"`, `"type": "host-local"`, `"type": "portmap"`, `"rangeStart": "10.218.0.10"`},
		"apiserver": {strings.Join(c.apiserverArgs("kube-apiserver", "http://127.0.0.1:2379"), " "),
			"--advertise-address=10.218.0.1", "--enable-aggregator-routing=true", "--kubelet-preferred-address-types=InternalIP,Hostname",
			"--requestheader-client-ca-file=", "--proxy-client-cert-file=", "--requestheader-allowed-names=front-proxy-client"},
	}
	for name, c := range checks {
		for _, want := range c[1:] {
			if !strings.Contains(c[0], want) {
				t.Errorf("%s config lacks %q:\n%s", name, want, c[0])
			}
		}
	}
	if strings.Contains(checks["apiserver"][0], "endpoint-reconciler-type=none") {
		t.Errorf("the apiserver must reconcile the kubernetes Service endpoints (pods reach it through them)")
	}
}

// A second node has its own address on the bridge, its own pod network behind it, its own
// containerd and cgroup parent, and a kubelet certificate for its name and address.
func TestSecondNodeIsItsOwn(t *testing.T) {
	c := DefaultConfig()
	c.NodeName, c.Nodes = "node1", 2
	n := c.node(2)
	checks := map[string][]string{
		"containerd": {c.containerdConfig(n), "/var/lib/podvirt-cluster/nodes/n2/containerd/containerd.sock", `conf_dir = "/var/lib/podvirt-cluster/nodes/n2/cni/net.d"`},
		"kubelet":    {c.kubeletConfig(n), "address: 10.218.0.2", "cgroupRoot: /podvirt-n2", "kubelet-serving-n2.crt", "unix:///var/lib/podvirt-cluster/nodes/n2/containerd/containerd.sock"},
		"kube-proxy": {c.kubeProxyConfig(n), "hostnameOverride: node1-2", "clusterCIDR: 10.220.0.0/16", "bindAddress: 10.218.0.2"},
		"cni":        {c.cniConfig(n), `"subnet": "10.220.0.0/16"`, `"gateway": "10.220.0.1"`, `"rangeStart": "10.220.0.10"`, "nodes/n2/cni/ipam"},
	}
	for name, c := range checks {
		for _, want := range c[1:] {
			if !strings.Contains(c[0], want) {
				t.Errorf("node 2's %s config lacks %q:\n%s", name, want, c[0])
			}
		}
	}
	if strings.Contains(c.kubeletConfig(c.node(1)), "cgroupRoot") {
		t.Errorf("node 1's kubelet keeps the default cgroup root")
	}
	found := false
	for _, s := range c.certSpecs() {
		if s.file == "kubelet-serving-n2" {
			found = s.cn == "node1-2" && len(s.ips) > 0 && s.ips[0].String() == "10.218.0.2"
		}
	}
	if !found {
		t.Errorf("no serving certificate for node1-2 at 10.218.0.2: %+v", c.certSpecs())
	}
	for _, bad := range []int{0, MaxNodes + 1} {
		c.Nodes = bad
		if err := c.validateNodes(); err == nil || !strings.Contains(err.Error(), "--nodes") {
			t.Errorf("Nodes=%d: want an error naming --nodes, got %v", bad, err)
		}
	}
	c.Nodes = MaxNodes
	if err := c.validateNodes(); err != nil {
		t.Errorf("Nodes=%d: %v", MaxNodes, err)
	}
}

func TestCertificatesCoverTheAddressesUsed(t *testing.T) {
	c := DefaultConfig()
	for _, s := range c.certSpecs() {
		if s.file != "apiserver" {
			continue
		}
		var ips []string
		for _, ip := range s.ips {
			ips = append(ips, ip.String())
		}
		got := strings.Join(append(ips, s.dns...), " ")
		for _, want := range []string{"10.218.0.1", "10.219.0.1", "kubernetes.default.svc.cluster.local"} {
			if !strings.Contains(got, want) {
				t.Errorf("apiserver certificate lacks %s: %s", want, got)
			}
		}
	}
}

func TestHelpers(t *testing.T) {
	if got := unescapeMount(`/var/lib/kubelet/pods/a\040b`); got != "/var/lib/kubelet/pods/a b" {
		t.Errorf("unescapeMount: %q", got)
	}
	for chain, ours := range map[string]bool{"KUBE-FIREWALL": true, "CNI-HOSTPORT-DNAT": true, "INPUT": false, "DOCKER": false} {
		if ourChain(chain) != ours {
			t.Errorf("ourChain(%s) = %v", chain, !ours)
		}
	}
}

// TestBoundIn reads a node's mountinfo as it was when a second node was added to a running first
// one: the host's kubelet dir (bound over itself, so rooted at /var/lib/kubelet) copied into the
// new namespace is not the node's own bind, whose root is the node's directory.
func TestBoundIn(t *testing.T) {
	const src = "/var/lib/podvirt-cluster/nodes/n2/host/var/lib/kubelet"
	copied := `22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
504 22 254:0 /var/lib/kubelet /var/lib/kubelet rw,relatime - ext4 /dev/vda rw
505 504 0:39 / /var/lib/kubelet/pods/624b/volumes/kubernetes.io~projected/kube-api-access-s rw,relatime - tmpfs tmpfs rw
`
	if boundIn(copied, src, "/var/lib/kubelet") {
		t.Error("the host's copied kubelet dir was taken for the node's bind")
	}
	ours := copied + "596 504 254:0 " + src + " /var/lib/kubelet rw,relatime shared:20 - ext4 /dev/vda rw\n"
	if !boundIn(ours, src, "/var/lib/kubelet") {
		t.Error("the node's own bind was not found")
	}
	// The state directory on a filesystem of its own: the bind's root is relative to it.
	own := "22 1 254:0 / / rw - ext4 /dev/vda rw\n30 22 254:1 / /var/lib/podvirt-cluster rw - ext4 /dev/vdb rw\n" +
		"40 22 254:1 /nodes/n2/host/var/lib/kubelet /var/lib/kubelet rw shared:3 - ext4 /dev/vdb rw\n"
	if !boundIn(own, src, "/var/lib/kubelet") {
		t.Error("a bind from a separately mounted state directory was not found")
	}
	if boundIn(own, src, "/var/log/pods") {
		t.Error("a bind at another target was taken")
	}
}

func TestMountsBeneath(t *testing.T) {
	info := `22 1 254:0 / / rw - ext4 /dev/vda rw
30 22 0:25 / /run rw - tmpfs tmpfs rw
31 30 0:4 net:[4026532300] /run/netns/cni-a rw - nsfs nsfs rw
32 30 0:4 net:[4026532301] /run/netns/cni-b rw - nsfs nsfs rw
33 30 0:25 /netns2 /run/netns2 rw - tmpfs tmpfs rw
34 22 254:0 /var/lib/kubelet /var/lib/kubelet rw - ext4 /dev/vda rw
35 34 0:39 / /var/lib/kubelet/pods/a/volumes/x rw - tmpfs tmpfs rw
36 34 254:0 /var/lib/kubelet /var/lib/kubelet rw shared:20 - ext4 /dev/vda rw
`
	got := strings.Join(mountsBeneath(info, "/run/netns"), " ")
	if got != "/run/netns/cni-a /run/netns/cni-b" {
		t.Errorf("beneath /run/netns (not itself a mount point): %q", got)
	}
	got = strings.Join(mountsBeneath(info, "/var/lib/kubelet"), " ")
	if got != "/var/lib/kubelet /var/lib/kubelet/pods/a/volumes/x" {
		t.Errorf("beneath /var/lib/kubelet: %q", got)
	}
	if got := mountsBeneath(info, "/var/log/pods"); len(got) != 0 {
		t.Errorf("nothing is mounted beneath /var/log/pods: %q", got)
	}
}

func TestForeignNetns(t *testing.T) {
	ours := "42 27 254:0 /run/netns /run/netns rw shared:1 - ext4 /dev/vda rw\n" +
		"50 42 0:4 net:[1] /run/netns/cni-08fe rw shared:8 - nsfs nsfs rw\n" +
		"51 42 0:4 net:[2] /run/netns/podvirt-n2 rw shared:9 - nsfs nsfs rw\n"
	if foreignNetns(ours) {
		t.Error("the cluster's own namespaces were taken for another tool's")
	}
	if !foreignNetns(ours + "52 42 0:4 net:[3] /run/netns/vpn rw shared:10 - nsfs nsfs rw\n") {
		t.Error("another tool's namespace was not seen")
	}
}
