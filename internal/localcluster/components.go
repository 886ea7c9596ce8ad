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
var componentNames = []string{compContainerd, compEtcd, compAPIServer, compController, compScheduler, compKubelet, compProxy, compProvisioner}

// components returns the argv of every component; binDir holds the Kubernetes binaries and self is
// this program (copied into the state directory) for the provisioner.
func (c Config) components(binDir, self string) []component {
	kc := func(n string) string { return c.path("kubeconfigs", n+".kubeconfig") }
	b := func(n string) string { return filepath.Join(binDir, n) }
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(c.EtcdClientPort)
	return []component{
		{compContainerd, []string{"/usr/bin/containerd", "--config", c.path("containerd", "config.toml")}},
		{compEtcd, []string{b("etcd"), "--name=podvirt", "--data-dir=" + c.path("etcd"),
			"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
			"--listen-peer-urls=http://127.0.0.1:" + strconv.Itoa(c.EtcdPeerPort),
			"--initial-advertise-peer-urls=http://127.0.0.1:" + strconv.Itoa(c.EtcdPeerPort),
			"--initial-cluster=podvirt=http://127.0.0.1:" + strconv.Itoa(c.EtcdPeerPort),
			"--listen-metrics-urls=", "--quota-backend-bytes=4294967296", "--log-level=warn"}},
		{compAPIServer, c.apiserverArgs(b("kube-apiserver"), etcdURL)},
		{compController, []string{b("kube-controller-manager"),
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
		{compScheduler, []string{b("kube-scheduler"),
			"--kubeconfig=" + kc("scheduler"),
			"--authentication-kubeconfig=" + kc("scheduler"),
			"--authorization-kubeconfig=" + kc("scheduler"),
			"--bind-address=127.0.0.1", "--leader-elect=false"}},
		{compKubelet, []string{b("kubelet"),
			"--config=" + c.path("kubelet-config.yaml"),
			"--kubeconfig=" + kc("kubelet"),
			"--hostname-override=" + c.NodeName,
			"--node-ip=" + c.NodeIP.String(),
			"--root-dir=" + c.KubeletRootDir,
			"--v=1"}},
		{compProxy, []string{b("kube-proxy"), "--config=" + c.path("kube-proxy-config.yaml"), "--v=1"}},
		{compProvisioner, []string{self, "provisioner", "--kubeconfig=" + kc("provisioner"), "--dir=" + c.volumeDir()}},
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

// writeConfigs writes containerd's, the CNI, kubelet's and kube-proxy's configuration files.
func (c Config) writeConfigs() error {
	files := map[string]string{
		c.path("containerd", "config.toml"):                  c.containerdConfig(),
		filepath.Join(c.cniConfDir(), "10-podvirt.conflist"): c.cniConfig(),
		c.path("kubelet-config.yaml"):                        c.kubeletConfig(),
		c.path("kube-proxy-config.yaml"):                     c.kubeProxyConfig(),
	}
	for p, content := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
	}
	return nil
}

func (c Config) containerdConfig() string {
	return strings.NewReplacer("@STATE@", c.path("containerd"), "@SOCK@", c.ContainerdSocket(),
		"@PAUSE@", PauseImage, "@CNICONF@", c.cniConfDir()).Replace(`version = 2
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
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "@CNICONF@"
`)
}

func (c Config) cniConfig() string {
	start := addrPlus(c.PodCIDR.Addr(), 10) // below .10: the gateway and room for fixed addresses
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
`, c.Bridge, c.path("cni", "ipam"), c.PodCIDR.String(), start.String(), c.NodeIP.String())
}

func (c Config) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
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
resolvConf: /etc/resolv.conf
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
`, c.NodeIP, c.pki("ca.crt"), c.pki("kubelet-serving.crt"), c.pki("kubelet-serving.key"), c.ContainerdSocket())
}

func (c Config) kubeProxyConfig() string {
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
`, c.path("kubeconfigs", "kube-proxy.kubeconfig"), c.NodeName, c.PodCIDR, c.NodeIP, c.NodeIP)
}

// addrPlus returns a advanced by n addresses.
func addrPlus(a netip.Addr, n int) netip.Addr {
	for range n {
		a = a.Next()
	}
	return a
}
