// Command podvirt-cluster runs the local Kubernetes cluster used for development and e2e tests (one
// node, or more on the same machine): up, down, status, logs [component], verify-clean.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podvirt/podvirt/internal/localcluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd(os.Stdout).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "podvirt-cluster:", err)
		os.Exit(1)
	}
}

func newRootCmd(out io.Writer) *cobra.Command {
	cfg := localcluster.DefaultConfig()
	root := &cobra.Command{
		Use:           "podvirt-cluster",
		Short:         "A real Kubernetes on this machine (root, Debian): one node, or more with up --nodes",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&cfg.StateDir, "state-dir", cfg.StateDir, "state directory (PKI, configs, data, PID files, logs)")
	var timeout time.Duration
	up := &cobra.Command{
		Use:   "up",
		Short: "Start the cluster, or add nodes to it (idempotent), and wait until every node is Ready",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return localcluster.Up(ctx, cfg, out)
		},
	}
	up.Flags().IntVar(&cfg.Nodes, "nodes", cfg.Nodes, fmt.Sprintf("how many nodes (1-%d): the host, and each further one a kubelet with its own containerd in its own network and mount namespace; nodes already up stay", localcluster.MaxNodes))
	up.Flags().StringVar(&cfg.CoreDNSBinary, "coredns", "", "CoreDNS's binary, the cluster DNS (default: the newest make coredns cached)")
	up.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "give up after this long (a cold build of the binaries takes ~15 min)")
	down := &cobra.Command{
		Use:   "down",
		Short: "Stop everything the cluster started and remove its state (the image cache stays)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return localcluster.Down(cmd.Context(), cfg, out)
		},
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "Show which components run",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return localcluster.Status(cmd.Context(), cfg, out)
		},
	}
	logs := &cobra.Command{
		Use:   "logs [component]",
		Short: "Print a component's log, or the last lines of all logs",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return localcluster.Logs(cfg, strings.Join(args, ""), out)
		},
	}
	verify := &cobra.Command{
		Use:   "verify-clean",
		Short: "Fail, listing them, if processes, mounts, netns, links, nft tables or iptables chains of the cluster are left",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			left := localcluster.Leftovers(cmd.Context(), cfg)
			if len(left) == 0 {
				fmt.Fprintln(out, "clean")
				return nil
			}
			for _, l := range left {
				fmt.Fprintln(out, l)
			}
			return fmt.Errorf("%d leftovers", len(left))
		},
	}
	buildPause := &cobra.Command{
		Use:   "build-pause",
		Short: "Build the sandbox (pause) image into the image cache",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := localcluster.BuildPauseImage(cmd.Context(), cfg)
			if err == nil {
				fmt.Fprintln(out, "wrote", p)
			}
			return err
		},
	}
	syncImages := &cobra.Command{
		Use:   "sync-images FILE.tar...",
		Short: "Import the image tarballs containerd lacks at the same digest; restart the workloads using them",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			return localcluster.SyncImages(cmd.Context(), cfg, files, out)
		},
	}
	root.AddCommand(up, down, status, logs, verify, buildPause, syncImages, newStopNodeCmd(&cfg, out), newStopAPIServerCmd(&cfg, out), newCutNodeCmd(&cfg, out, "cut-node"), newCutNodeCmd(&cfg, out, "heal-node"), newMultusCmd(&cfg, out), newProvisionerCmd(out))
	return root
}

// newStopNodeCmd kills a node's kubelet and kube-proxy (the e2e node-loss test uses it).
func newStopNodeCmd(cfg *localcluster.Config, out io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "stop-node NAME",
		Short: "Kill a node's kubelet and kube-proxy at once, as a lost node stops answering (its containers keep running); up starts them again",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return localcluster.StopNode(cmd.Context(), *cfg, args[0], out)
		},
	}
}

// newStopAPIServerCmd kills the kube-apiserver (the e2e control-plane outage test uses it).
func newStopAPIServerCmd(cfg *localcluster.Config, out io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "stop-apiserver",
		Short: "Kill the kube-apiserver, as a control-plane outage begins (etcd, nodes and workloads keep running); up starts it again",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return localcluster.StopAPIServer(cmd.Context(), *cfg, out)
		},
	}
}

// newCutNodeCmd cuts a node off the cluster's network, or heals it (the e2e partition test uses them).
func newCutNodeCmd(cfg *localcluster.Config, out io.Writer, verb string) *cobra.Command {
	act, short := localcluster.CutNode, "Take an extra node's link on the cluster bridge down, as a partition begins (kubelet, agent and guests keep running, reaching no one); heal-node or up brings it back"
	if verb == "heal-node" {
		act, short = localcluster.HealNode, "Bring a node cut-node cut off back onto the cluster bridge"
	}
	return &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return act(cmd.Context(), *cfg, args[0], out)
		},
	}
}

// newMultusCmd installs or removes Multus' thin CNI plugin (`make cluster-multus` builds it).
func newMultusCmd(cfg *localcluster.Config, out io.Writer) *cobra.Command {
	var binary, manifest string
	cmd := &cobra.Command{
		Use:       "multus on|off",
		Short:     "Install Multus' thin plugin (secondary networks for Pods and VMs created afterwards) or remove it",
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		ValidArgs: []string{"on", "off"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if manifest == "" {
				return fmt.Errorf("--manifest (Multus' deployments/multus-daemonset.yml, for the CRD) is required")
			}
			if args[0] == "on" && binary == "" {
				return fmt.Errorf("--binary (Multus' thin plugin) is required to turn Multus on")
			}
			if args[0] == "off" {
				return localcluster.DisableMultus(cmd.Context(), *cfg, manifest)
			}
			if err := localcluster.EnableMultus(cmd.Context(), *cfg, binary, manifest); err != nil {
				return err
			}
			fmt.Fprintf(out, "Multus is on: NetworkAttachmentDefinitions of type bridge may use %s on the first node\n", localcluster.SecondaryBridge)
			return nil
		},
	}
	cmd.Flags().StringVar(&binary, "binary", "", "Multus' thin plugin (cmd/multus)")
	cmd.Flags().StringVar(&manifest, "manifest", "", "Multus' deployments/multus-daemonset.yml (the NetworkAttachmentDefinition CRD)")
	return cmd
}

// newProvisionerCmd is the volume provisioner process Up starts (not for direct use).
func newProvisionerCmd(out io.Writer) *cobra.Command {
	var kubeconfig, dir string
	cmd := &cobra.Command{
		Use:    "provisioner",
		Short:  "Serve the default StorageClass with hostPath volumes (started by up)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("--kubeconfig: %w", err)
			}
			cs, err := kubernetes.NewForConfig(rc)
			if err != nil {
				return err
			}
			return localcluster.RunProvisioner(cmd.Context(), cs, dir, out)
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the provisioner")
	cmd.Flags().StringVar(&dir, "dir", "", "directory holding the volumes")
	return cmd
}
