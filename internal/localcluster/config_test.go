package localcluster

import (
	"strings"
	"testing"
)

// The settings local-cluster.md found REQUIRED on these machines must stay in the rendered configs.
func TestRenderedConfigsKeepRequiredSettings(t *testing.T) {
	c := DefaultConfig()
	c.NodeName = "node1"
	checks := map[string][]string{
		"containerd": {c.containerdConfig(), "restrict_oom_score_adj = true", "SystemdCgroup = false", `sandbox_image = "` + PauseImage + `"`, `bin_dir = "/usr/lib/cni"`, c.ContainerdSocket()},
		"kubelet":    {c.kubeletConfig(), "cgroupDriver: cgroupfs", "failCgroupV1: false", "failSwapOn: false", "address: 10.218.0.1"},
		"kube-proxy": {c.kubeProxyConfig(), "mode: nftables", "hostnameOverride: node1"},
		"cni":        {c.cniConfig(), `"bridge": "podvirt-br0"`, `"type": "host-local"`, `"type": "portmap"`, `"rangeStart": "10.218.0.10"`},
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
