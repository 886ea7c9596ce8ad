package localcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Leftovers lists everything of a cluster still on the machine: processes, mounts, network
// namespaces, links, nftables tables, iptables chains and directories. Empty means clean.
func Leftovers(ctx context.Context, c Config) []string {
	var left []string
	for _, p := range processesMentioning(c.StateDir) {
		left = append(left, "process "+p.String())
	}
	for _, mp := range c.ourMounts() {
		left = append(left, "mount "+mp)
	}
	for _, ns := range c.ourNetns() {
		left = append(left, "netns "+ns)
	}
	left = append(left, nodeLeftovers()...)
	if out, err := run(ctx, "ip", "-o", "link", "show"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 1 && (strings.HasPrefix(f[1], "podvirt") || strings.Contains(line, "master "+c.Bridge+" ")) {
				left = append(left, "link "+strings.TrimSuffix(f[1], ":"))
			}
		}
	}
	for _, t := range ourNftTables(ctx) {
		left = append(left, "nft table "+t)
	}
	if chains, err := iptablesChains(ctx); err == nil {
		for _, ch := range chains {
			if parts := strings.SplitN(ch, "/", 3); len(parts) == 3 && ourChain(parts[2]) {
				left = append(left, "iptables chain "+ch)
			}
		}
	}
	for _, d := range []string{c.StateDir, c.KubeletRootDir, "/var/log/pods", "/var/log/containers"} {
		if exists(d) {
			left = append(left, "directory "+d)
		}
	}
	return left
}

// Status prints which components run and, when the apiserver answers, the node and pod counts.
func Status(ctx context.Context, c Config, out io.Writer) error {
	if !exists(c.StateDir) {
		fmt.Fprintf(out, "no cluster (%s does not exist)\n", c.StateDir)
		return nil
	}
	for _, n := range c.allComponentNames() {
		if pid, ok := c.running(n); ok {
			fmt.Fprintf(out, "%-24s running  pid %d\n", n, pid)
		} else {
			fmt.Fprintf(out, "%-24s stopped\n", n)
		}
	}
	if _, ok := c.running(compAPIServer); !ok {
		return nil
	}
	cs, err := c.clientset()
	if err != nil {
		return err
	}
	for _, n := range c.existingNodes() {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			fmt.Fprintf(out, "node %s: %v\n", n.name, err)
		} else {
			fmt.Fprintf(out, "node %s: ready=%v\n", node.Name, nodeReady(node))
		}
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err == nil {
		fmt.Fprintf(out, "pods: %d\n", len(pods.Items))
	}
	fmt.Fprintf(out, "apiserver %s\ncontainerd %s\nexport KUBECONFIG=%s\n", c.APIServerURL(), c.ContainerdSocket(), c.Kubeconfig())
	return nil
}

// Logs prints one component's whole log, or the last lines of every component's log.
func Logs(c Config, component string, out io.Writer) error {
	if component != "" {
		f, err := os.Open(c.LogFile(component))
		if err != nil {
			return fmt.Errorf("log of %q (one of %s): %w", component, strings.Join(c.allComponentNames(), ", "), err)
		}
		defer f.Close()
		_, err = io.Copy(out, f)
		return err
	}
	files, _ := filepath.Glob(c.LogFile("*"))
	sort.Strings(files)
	if len(files) == 0 {
		return fmt.Errorf("no logs in %s", filepath.Dir(c.LogFile("x")))
	}
	for _, f := range files {
		fmt.Fprintf(out, "==> %s <==\n%s\n", f, tail(f, 15))
	}
	return nil
}
