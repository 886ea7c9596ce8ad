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
