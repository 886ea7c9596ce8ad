package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

// SecondaryBridge is the host bridge a NetworkAttachmentDefinition of type bridge may use on the
// first node for a secondary network (the bridge plugin creates it); Down removes it.
const SecondaryBridge = "podvirt-br1"

// hostCNIBinDir holds the CNI plugins of Debian's containernetworking-plugins.
const hostCNIBinDir = "/usr/lib/cni"

// cniBinDir is containerd's CNI bin_dir: links to the host's plugins, and Multus when enabled.
func (c Config) cniBinDir() string { return c.path("cni", "bin") }

// multusConf is the CNI configuration that makes Multus every pod's network on node n.
func (n node) multusConf() string { return filepath.Join(n.cniConfDir(), "00-multus.conf") }

// linkCNIPlugins links every plugin of the host into cniBinDir.
func (c Config) linkCNIPlugins() error {
	entries, err := os.ReadDir(hostCNIBinDir)
	if err != nil {
		return fmt.Errorf("CNI plugins: %w", err)
	}
	if err := os.MkdirAll(c.cniBinDir(), 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		link := filepath.Join(c.cniBinDir(), e.Name())
		if err := os.Symlink(filepath.Join(hostCNIBinDir, e.Name()), link); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("link CNI plugin %s: %w", e.Name(), err)
		}
	}
	return nil
}

// EnableMultus installs Multus' thin plugin (binary, built from its module) the way its own
// installer does: the plugin in the CNI bin dir, a 00-multus.conf on every node delegating the
// cluster network to the node's conflist (its state under the cluster's directory), and the
// NetworkAttachmentDefinition CRD from manifest (Multus' deployments/multus-daemonset.yml).
// Pods created from now on get their networks through Multus.
func EnableMultus(ctx context.Context, c Config, binary, manifest string) error {
	crd, err := crdFrom(manifest)
	if err != nil {
		return err
	}
	if binary, err = filepath.Abs(binary); err != nil {
		return err
	}
	if _, err := os.Stat(binary); err != nil {
		return fmt.Errorf("Multus' plugin: %w", err)
	}
	nodes := c.existingNodes()
	for _, n := range nodes { // else containerd looks for Multus where it is not: no Pod would start
		conf, err := os.ReadFile(filepath.Join(n.dir, "containerd", "config.toml"))
		if err != nil || !strings.Contains(string(conf), fmt.Sprintf("bin_dir = %q", c.cniBinDir())) {
			return fmt.Errorf("node %s's containerd does not take CNI plugins from %s (a cluster brought up before Multus support): make cluster-down cluster-up first", n.name, c.cniBinDir())
		}
	}
	link := filepath.Join(c.cniBinDir(), "multus")
	if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Symlink(binary, link); err != nil {
		return fmt.Errorf("install Multus: %w", err)
	}
	for _, n := range nodes {
		conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "multus-cni-network",
  "type": "multus",
  "capabilities": {"portMappings": true},
  "kubeconfig": %q,
  "clusterNetwork": %q,
  "binDir": %q,
  "cniDir": %q
}
`, c.Kubeconfig(), n.cniConfList(), c.cniBinDir(), filepath.Join(n.dir, "cni", "multus"))
		if err := os.WriteFile(n.multusConf(), []byte(conf), 0o644); err != nil {
			return fmt.Errorf("install Multus on %s: %w", n.name, err)
		}
	}
	cs, err := c.apiextensions()
	if err != nil {
		return err
	}
	if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %s: %w", crd.Name, err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil // looked at again until the timeout
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// DisableMultus undoes EnableMultus: pods created from now on get the cluster network directly. The
// CRD (and every NetworkAttachmentDefinition) is deleted. Delete the pods Multus gave secondary
// networks first, so that their networks are released through it.
func DisableMultus(ctx context.Context, c Config, manifest string) error {
	var errs []error
	for _, n := range c.existingNodes() {
		if err := os.Remove(n.multusConf()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(filepath.Join(c.cniBinDir(), "multus")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	crd, err := crdFrom(manifest)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	cs, err := c.apiextensions()
	if err == nil {
		err = cs.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete %s: %w", crd.Name, err))
	}
	return errors.Join(errs...)
}

// crdFrom reads the CustomResourceDefinition out of a multi-document manifest.
func crdFrom(manifest string) (*apiextensionsv1.CustomResourceDefinition, error) {
	raw, err := os.ReadFile(manifest)
	if err != nil {
		return nil, fmt.Errorf("Multus manifest: %w", err)
	}
	for _, doc := range strings.Split(string(raw), "\n---") {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal([]byte(doc), crd); err == nil && crd.Kind == "CustomResourceDefinition" {
			return crd, nil
		}
	}
	return nil, fmt.Errorf("%s holds no CustomResourceDefinition", manifest)
}

func (c Config) apiextensions() (*apiextensions.Clientset, error) {
	cfg, err := c.restConfig()
	if err != nil {
		return nil, err
	}
	return apiextensions.NewForConfig(cfg)
}
