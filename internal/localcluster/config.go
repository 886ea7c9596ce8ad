// Package localcluster runs a real single-node Kubernetes on this machine from locally built
// binaries: its own PKI, etcd, the control plane, containerd, kubelet, kube-proxy (nftables) and a
// CNI bridge, each a detached process with a PID file and a log in the state directory, and tears
// all of it down again, leaving nothing behind.
//
// Everything it creates on the host is named with a "podvirt" prefix (bridge, state directory) or
// recorded in the state directory (processes, host paths, sysctls, iptables chains), so Down
// removes exactly what Up made.
package localcluster

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// DefaultStateDir holds everything the cluster writes except the kubelet's root directory.
const DefaultStateDir = "/var/lib/podvirt-cluster"

// Config is where the cluster lives and which addresses it uses.
type Config struct {
	// StateDir holds PKI, configs, data, PID files and logs; Down removes it.
	StateDir string
	// KubeletRootDir is the kubelet's --root-dir (/var/lib/kubelet, as on real clusters).
	KubeletRootDir string
	// CacheDir keeps slow artifacts across clusters (binaries, image tarballs).
	CacheDir string
	// RepoDir is the Podvirt source tree (the pause image is built from it).
	RepoDir string
	// NodeName is the kubelet's --hostname-override.
	NodeName string
	// Bridge is the CNI bridge; the tooling creates it with NodeIP so the apiserver can advertise
	// an address pods reach.
	Bridge string
	// NodeIP is on Bridge: the node's InternalIP, the apiserver's advertise address, the pods' gateway.
	NodeIP netip.Addr
	// PodCIDR is the bridge network pods get addresses from.
	PodCIDR netip.Prefix
	// ServiceCIDR is the ClusterIP range; its first address is the kubernetes Service.
	ServiceCIDR netip.Prefix
	// APIServerPort is the apiserver's secure port on NodeIP.
	APIServerPort int
	// EtcdClientPort and EtcdPeerPort are etcd's ports on 127.0.0.1.
	EtcdClientPort, EtcdPeerPort int
	// CoreDNSBinary is CoreDNS, the cluster DNS (make coredns builds it from its module).
	CoreDNSBinary string
	// Nodes is how many nodes Up brings up (1 to MaxNodes): the host itself, and each further one a
	// kubelet with its own containerd in its own network and mount namespace (see node).
	Nodes int
}

// DefaultConfig returns the settings the make targets use.
func DefaultConfig() Config {
	cache := os.Getenv("PODVIRT_CACHE")
	if cache == "" {
		cache = "/var/cache/podvirt"
	}
	wd, _ := os.Getwd()
	return Config{
		StateDir:       DefaultStateDir,
		KubeletRootDir: "/var/lib/kubelet",
		CacheDir:       cache,
		RepoDir:        wd,
		NodeName:       nodeName(),
		Bridge:         "podvirt-br0",
		NodeIP:         netip.MustParseAddr("10.218.0.1"),
		PodCIDR:        netip.MustParsePrefix("10.218.0.0/16"),
		ServiceCIDR:    netip.MustParsePrefix("10.219.0.0/16"),
		APIServerPort:  6443,
		EtcdClientPort: 2379,
		EtcdPeerPort:   2380,
		Nodes:          1,
	}
}

func nodeName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "podvirt-node"
	}
	return strings.ToLower(h)
}

// Paths under the state directory.

func (c Config) path(elem ...string) string {
	return filepath.Join(append([]string{c.StateDir}, elem...)...)
}

// Kubeconfig is the cluster-admin kubeconfig.
func (c Config) Kubeconfig() string { return c.path("kubeconfig") }

// ContainerdSocket is the first node's containerd socket.
func (c Config) ContainerdSocket() string { return c.node(1).containerdSocket() }

// ImageDir keeps image tarballs across clusters; Up imports every tarball found there.
func (c Config) ImageDir() string { return filepath.Join(c.CacheDir, "images") }

// LogFile is where a component's output goes.
func (c Config) LogFile(component string) string { return c.path("logs", component+".log") }

func (c Config) pidFile(component string) string { return c.path("run", component+".pid") }
func (c Config) pkiDir() string                  { return c.path("pki") }
func (c Config) volumeDir() string               { return c.path("volumes") }

// APIServerURL is how clients reach the apiserver.
func (c Config) APIServerURL() string {
	return "https://" + netip.AddrPortFrom(c.NodeIP, uint16(c.APIServerPort)).String()
}

// kubernetesServiceIP is the first address of the service range.
func (c Config) kubernetesServiceIP() netip.Addr { return c.ServiceCIDR.Addr().Next() }

// PauseImage is the sandbox image containerd runs in every pod.
const PauseImage = "docker.io/podvirt/pause:dev"

// StorageClassName is the default StorageClass served by the local provisioner.
const StorageClassName = "podvirt-local"
