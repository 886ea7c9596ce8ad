package localcluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podvirt/podvirt/internal/atomicfile"
)

// Up brings the cluster up (or completes a partly started one, or adds nodes to a running one)
// and waits until every node is Ready and the default ServiceAccount exists. It returns while the
// cluster keeps running.
func Up(ctx context.Context, c Config, out io.Writer) error {
	began := time.Now()
	step := func(what string) { fmt.Fprintf(out, "[%5.1fs] %s\n", time.Since(began).Seconds(), what) }
	if err := Preflight(); err != nil {
		return err
	}
	if err := c.validateNodes(); err != nil {
		return err
	}
	if c.CoreDNSBinary == "" { // the one make coredns caches (the e2e tests bring nodes back up without the flag)
		c.CoreDNSBinary = c.cachedCoreDNS()
	}
	if c.CoreDNSBinary == "" {
		return fmt.Errorf("--coredns: the cluster DNS binary is required and none is cached under %s (make coredns builds it)", filepath.Join(c.CacheDir, "bin"))
	}
	if _, err := os.Stat(c.CoreDNSBinary); err != nil {
		return fmt.Errorf("--coredns: %w", err)
	}
	step("packages")
	if err := ensurePackages(ctx); err != nil {
		return err
	}
	step("kubernetes binaries")
	binDir, err := c.ensureBinaries(ctx, out)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.StateDir, 0o755); err != nil {
		return err
	}
	if err := c.recordHost(ctx); err != nil {
		return err
	}
	step("network, pki, configs")
	if err := c.prepareHost(ctx); err != nil {
		return err
	}
	self, err := c.installSelf()
	if err != nil {
		return err
	}
	comps := c.components(binDir, self)
	if err := c.startRuntimes(ctx, comps, step); err != nil {
		return err
	}
	step("etcd")
	if err := c.startAndWait(ctx, comps[compEtcd], 60*time.Second, c.etcdHealthy); err != nil {
		return err
	}
	cs, err := c.clientset()
	if err != nil {
		return err
	}
	step("kube-apiserver")
	if err := c.startAndWait(ctx, comps[compAPIServer], 120*time.Second, apiserverReady(cs)); err != nil {
		return err
	}
	step("cluster DNS (CoreDNS)")
	if err := ensureCoreDNSRBAC(ctx, cs); err != nil {
		return err
	}
	if err := c.startAndWait(ctx, comps[compDNS], 60*time.Second, c.dnsReady); err != nil {
		return err
	}
	if err := c.ensureDNSService(ctx, cs); err != nil {
		return err
	}
	step("controller-manager, scheduler, kubelets, kube-proxies, provisioner")
	for _, name := range c.afterAPIServer() {
		if err := c.start(comps[name]); err != nil {
			return err
		}
	}
	if err := ensureStorageClass(ctx, cs); err != nil {
		return err
	}
	step("waiting for every node Ready and the default ServiceAccount")
	if err := c.waitReady(ctx, cs, 180*time.Second); err != nil {
		return err
	}
	step("cluster is up")
	fmt.Fprintf(out, "\nUse it with:\n  export KUBECONFIG=%s\n  kubectl get nodes\n", c.Kubeconfig())
	return nil
}

// afterAPIServer names the components started once the apiserver is ready, in order.
func (c Config) afterAPIServer() []string {
	names := []string{compController, compScheduler}
	for _, n := range c.nodes() {
		names = append(names, n.comp(compKubelet), n.comp(compProxy))
	}
	return append(names, compProvisioner)
}

// prepareHost sets sysctls, creates the bridge and the extra nodes' namespaces, and writes PKI and
// configuration files.
func (c Config) prepareHost(ctx context.Context) error {
	if err := setSysctls(sysctls); err != nil {
		return err
	}
	if err := c.ensureBridge(ctx); err != nil {
		return err
	}
	if err := c.ensurePKI(); err != nil {
		return err
	}
	for _, d := range []string{c.volumeDir(), c.KubeletRootDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := ensureNetnsRunDir(ctx); err != nil {
		return err
	}
	for _, n := range c.nodes() {
		if err := os.MkdirAll(filepath.Join(n.dir, "cni", "ipam"), 0o755); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
		if n.extra() {
			if err := c.ensureNodeHost(ctx, n); err != nil {
				return err
			}
		}
	}
	return c.writeConfigs()
}

// startRuntimes starts every node's containerd, builds the sandbox image and imports it and every
// cached image into each containerd (the nodes in parallel).
func (c Config) startRuntimes(ctx context.Context, comps map[string]component, step func(string)) error {
	step("containerd")
	for _, n := range c.nodes() {
		if err := c.startAndWait(ctx, comps[n.comp(compContainerd)], 30*time.Second, containerdReady(n.containerdSocket())); err != nil {
			return err
		}
	}
	step("pause image")
	if _, err := c.buildPauseImage(ctx); err != nil {
		return err
	}
	step("importing cached images from " + c.ImageDir())
	var g errgroup.Group
	for _, n := range c.nodes() {
		g.Go(func() error { return c.importCachedImages(ctx, n.containerdSocket(), io.Discard) })
	}
	return g.Wait()
}

// installSelf copies this program into the state directory: `go run` deletes its binary on exit,
// and the provisioner process outlives it.
func (c Config) installSelf() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	dst := c.path("bin", "podvirt-cluster")
	if _, ok := c.running(compProvisioner); ok {
		return dst, nil // in use; the running copy stays
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		return "", fmt.Errorf("read own binary: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	return dst, atomicfile.WriteFile(dst, data, 0o755)
}

// startAndWait starts a component and waits until ready reports true, failing early (with the
// log's tail) if the process dies.
func (c Config) startAndWait(ctx context.Context, comp component, timeout time.Duration, ready func(context.Context) bool) error {
	if err := c.start(comp); err != nil {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if _, ok := c.running(comp.name); !ok {
			return false, fmt.Errorf("%s exited", comp.name)
		}
		return ready(ctx), nil
	})
	if err != nil {
		return fmt.Errorf("%s not ready: %w\n--- last lines of %s:\n%s", comp.name, err, c.LogFile(comp.name), tail(c.LogFile(comp.name), 25))
	}
	return nil
}

func containerdReady(socket string) func(context.Context) bool {
	return func(ctx context.Context) bool {
		_, err := run(ctx, "ctr", "--address", socket, "version")
		return err == nil
	}
}

func (c Config) etcdHealthy(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(c.EtcdClientPort)+"/health", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func apiserverReady(cs kubernetes.Interface) func(context.Context) bool {
	return func(ctx context.Context) bool {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok"
	}
}

func (c Config) clientset() (*kubernetes.Clientset, error) {
	cfg, err := c.restConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// restConfig is the admin kubeconfig's, with a timeout for each request.
func (c Config) restConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", c.Kubeconfig(), err)
	}
	cfg.Timeout = 10 * time.Second
	return cfg, nil
}

// waitReady waits for every node to be Ready and the default ServiceAccount to exist.
func (c Config) waitReady(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, n := range c.afterAPIServer() {
			if _, ok := c.running(n); !ok {
				return false, fmt.Errorf("%s exited; see %s", n, c.LogFile(n))
			}
		}
		for _, n := range c.nodes() {
			node, err := cs.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
			if err != nil {
				last = "node: " + err.Error()
				return false, nil
			}
			if !nodeReady(node) {
				last = "node " + n.name + " not Ready"
				return false, nil
			}
		}
		if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			last = "default ServiceAccount: " + err.Error()
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the nodes: %w (last: %s)", err, last)
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// tail returns the last n lines of a file.
func tail(p string, n int) string {
	data, err := os.ReadFile(p)
	if err != nil {
		return err.Error()
	}
	lines := splitLines(string(data))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	s := ""
	for _, l := range lines {
		s += l + "\n"
	}
	return s
}
