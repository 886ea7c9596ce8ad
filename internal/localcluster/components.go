package localcluster

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// component is one long-running process of the cluster.
type component struct {
	name string
	argv []string
	// node is set for the processes of an extra node: they run in its network and mount namespaces.
	node *node
}

// Names of the components, in start order (Down stops them in reverse, kubelet's pods first).
const (
	compContainerd  = "containerd"
	compEtcd        = "etcd"
	compAPIServer   = "kube-apiserver"
	compController  = "kube-controller-manager"
	compScheduler   = "kube-scheduler"
	compKubelet     = "kubelet"
	compProxy       = "kube-proxy"
	compProvisioner = "provisioner"
)

// componentNames lists every component in start order.
var componentNames = []string{compContainerd, compEtcd, compAPIServer, compDNS, compController, compScheduler, compKubelet, compProxy, compProvisioner}

// perNodeComponents are the components every node runs.
var perNodeComponents = []string{compContainerd, compKubelet, compProxy}

// allComponentNames adds the components of the extra nodes that exist.
func (c Config) allComponentNames() []string {
	names := append([]string{}, componentNames...)
	for _, n := range c.existingNodes()[1:] {
		for _, base := range perNodeComponents {
			names = append(names, n.comp(base))
		}
	}
	return names
}

// components returns the argv of every component of the control plane and of the nodes Up brings
// up; binDir holds the Kubernetes binaries and self is this program (copied into the state
// directory) for the provisioner.
func (c Config) components(binDir, self string) map[string]component {
	kc := func(n string) string { return c.path("kubeconfigs", n+".kubeconfig") }
	b := func(n string) string { return filepath.Join(binDir, n) }
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(c.EtcdClientPort)
	comps := []component{
		{name: compEtcd, argv: []string{b("etcd"), "--name=podvirt", "--data-dir=" + c.path("etcd"),
			"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
			"--listen-peer-urls=http://127.0.0.1:" + strconv.Itoa(c.EtcdPeerPort),
			"--initial-advertise-peer-urls=http://127.0.0.1:" + strconv.Itoa(c.EtcdPeerPort),
			"--initial-cluster=podvirt=http://127.0.0.1:" + strconv.Itoa(c.EtcdPeerPort),
			"--listen-metrics-urls=", "--quota-backend-bytes=4294967296", "--log-level=warn"}},
		{name: compAPIServer, argv: c.apiserverArgs(b("kube-apiserver"), etcdURL)},
		{name: compController, argv: []string{b("kube-controller-manager"),
			"--kubeconfig=" + kc("controller-manager"),
			"--authentication-kubeconfig=" + kc("controller-manager"),
			"--authorization-kubeconfig=" + kc("controller-manager"),
			"--bind-address=127.0.0.1", "--leader-elect=false",
			"--cluster-signing-cert-file=" + c.pki("ca.crt"), "--cluster-signing-key-file=" + c.pki("ca.key"),
			"--root-ca-file=" + c.pki("ca.crt"),
			"--service-account-private-key-file=" + c.pki("sa.key"),
			"--use-service-account-credentials=true",
			"--service-cluster-ip-range=" + c.ServiceCIDR.String(),
			"--controllers=*,bootstrapsigner,tokencleaner"}},
		{name: compScheduler, argv: []string{b("kube-scheduler"),
			"--kubeconfig=" + kc("scheduler"),
			"--authentication-kubeconfig=" + kc("scheduler"),
			"--authorization-kubeconfig=" + kc("scheduler"),
			"--bind-address=127.0.0.1", "--leader-elect=false"}},
		{name: compProvisioner, argv: []string{self, "provisioner", "--kubeconfig=" + kc("provisioner"), "--dir=" + c.volumeDir()}},
		c.dnsComponent(),
	}
	for _, n := range c.nodes() {
		comps = append(comps, c.nodeComponents(n, binDir)...)
	}
	out := map[string]component{}
	for _, comp := range comps {
		out[comp.name] = comp
	}
	return out
}

// nodeComponents returns a node's containerd, kubelet and kube-proxy.
func (c Config) nodeComponents(n node, binDir string) []component {
	var ns *node
	if n.extra() {
		ns = &n
	}
	return []component{
		{name: n.comp(compContainerd), node: ns, argv: []string{"/usr/bin/containerd", "--config", filepath.Join(n.dir, "containerd", "config.toml")}},
		{name: n.comp(compKubelet), node: ns, argv: []string{filepath.Join(binDir, "kubelet"),
			"--config=" + filepath.Join(n.dir, "kubelet-config.yaml"),
			"--kubeconfig=" + c.kubeletKubeconfig(n),
			"--hostname-override=" + n.name,
			"--node-ip=" + n.ip.String(),
			"--root-dir=" + c.KubeletRootDir,
			"--v=1"}},
		{name: n.comp(compProxy), node: ns, argv: []string{filepath.Join(binDir, "kube-proxy"), "--config=" + filepath.Join(n.dir, "kube-proxy-config.yaml"), "--v=1"}},
	}
}

func (c Config) apiserverArgs(bin, etcdURL string) []string {
	return []string{bin,
		"--advertise-address=" + c.NodeIP.String(),
		"--bind-address=" + c.NodeIP.String(),
		"--secure-port=" + strconv.Itoa(c.APIServerPort),
		"--etcd-servers=" + etcdURL,
		"--service-cluster-ip-range=" + c.ServiceCIDR.String(),
		"--allow-privileged=true",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--admission-control-config-file=" + c.admissionConfig(),
		"--client-ca-file=" + c.pki("ca.crt"),
		"--tls-cert-file=" + c.pki("apiserver.crt"),
		"--tls-private-key-file=" + c.pki("apiserver.key"),
		"--kubelet-client-certificate=" + c.pki("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + c.pki("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority=" + c.pki("ca.crt"),
		// InternalIP first: it is the address on our bridge; the host name may resolve to loopback,
		// which node proxy refuses.
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.pki("sa.pub"),
		"--service-account-signing-key-file=" + c.pki("sa.key"),
		// Aggregation: the front-proxy CA and client certificate the aggregator presents.
		"--requestheader-client-ca-file=" + c.pki("front-proxy-ca.crt"),
		"--requestheader-allowed-names=" + frontProxyClientCN,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + c.pki("front-proxy-client.crt"),
		"--proxy-client-key-file=" + c.pki("front-proxy-client.key"),
		"--enable-aggregator-routing=true",
	}
}

// writeConfigs writes containerd's, the CNI, kubelet's and kube-proxy's configuration files of
// every node Up brings up.
func (c Config) writeConfigs() error {
	files := map[string]string{}
	files[c.admissionConfig()] = c.admissionConfigFile()
	files[c.webhookKubeconfig()] = c.webhookKubeconfigFile()
	files[c.corefile()] = c.corefileContent()
	for _, n := range c.nodes() {
		files[filepath.Join(n.dir, "containerd", "config.toml")] = c.containerdConfig(n)
		files[n.cniConfList()] = c.cniConfig(n)
		files[filepath.Join(n.dir, "kubelet-config.yaml")] = c.kubeletConfig(n)
		files[filepath.Join(n.dir, "kube-proxy-config.yaml")] = c.kubeProxyConfig(n)
	}
	if err := c.linkCNIPlugins(); err != nil {
		return err
	}
	for p, content := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if old, err := os.ReadFile(p); err == nil && string(old) == content {
			continue // kube-proxy exits when its configuration file is written to
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
	}
	return nil
}

func (c Config) containerdConfig(n node) string {
	return strings.NewReplacer("@STATE@", filepath.Join(n.dir, "containerd"), "@SOCK@", n.containerdSocket(),
		"@PAUSE@", PauseImage, "@CNICONF@", n.cniConfDir(), "@CNIBIN@", c.cniBinDir()).Replace(`version = 2
root = "@STATE@/root"
state = "@STATE@/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "@SOCK@"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "@PAUSE@"
  # The machine's capability bounding set lacks CAP_SYS_RESOURCE: without this every pod fails
  # with "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  # Device nodes (the device plugin's /dev/net/tun, /dev/kvm) owned by the container's runAsUser:
  # the unprivileged launcher opens them whatever their mode on the host (0600 for tun here).
  device_ownership_from_security_context = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "@CNIBIN@"
    conf_dir = "@CNICONF@"
`)
}

// cniConfig is a node's bridge network. Node 1's bridge is the cluster bridge on the host; an
// extra node's is a bridge of the same name inside its network namespace.
func (c Config) cniConfig(n node) string {
	start := addrPlus(n.podCIDR.Addr(), 10) // below .10: the gateway and room for fixed addresses
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "podvirt",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q, "rangeStart": %q, "gateway": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, c.Bridge, filepath.Join(n.dir, "cni", "ipam"), n.podCIDR.String(), start.String(), n.gateway().String())
}

func (c Config) kubeletConfig(n node) string {
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
tlsCertFile: %s
tlsPrivateKeyFile: %s
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
clusterDomain: cluster.local
clusterDNS: [%s]
resolvConf: /etc/resolv.conf
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
`, n.ip, c.pki("ca.crt"), c.pki(n.comp("kubelet-serving")+".crt"), c.pki(n.comp("kubelet-serving")+".key"), n.containerdSocket(), c.dnsServiceIP())
	if n.extra() {
		cfg += "cgroupRoot: " + n.cgroupParent() + "\n"
	}
	return cfg
}

func (c Config) kubeProxyConfig(n node) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection: {kubeconfig: %s}
hostnameOverride: %s
clusterCIDR: %s
bindAddress: %s
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
nodePortAddresses: ["%s/32"]
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, c.path("kubeconfigs", "kube-proxy.kubeconfig"), n.name, n.podCIDR, n.ip, n.ip)
}

// kubeletKubeconfig is a node's kubelet client kubeconfig (system:node:NAME).
func (c Config) kubeletKubeconfig(n node) string {
	return c.path("kubeconfigs", n.comp("kubelet")+".kubeconfig")
}

// addrPlus returns a advanced by n addresses.
func addrPlus(a netip.Addr, n int) netip.Addr {
	for range n {
		a = a.Next()
	}
	return a
}
