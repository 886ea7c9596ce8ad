package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	"github.com/podvirt/podvirt/cli/dashboard"
)

// DashboardOptions is `dashboard`: the terminal UI of the namespace's VMs (or all, -A).
type DashboardOptions struct {
	genericiooptions.IOStreams
	kube          *genericclioptions.ConfigFlags
	AllNamespaces bool
	flagArgs      []string // the kubeconfig flags given, for the console it starts
}

func newDashboardCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &DashboardOptions{IOStreams: streams, kube: kube}
	cmd := &cobra.Command{
		Use:     "dashboard",
		Short:   "Watch and drive VMs in an interactive terminal dashboard",
		Example: "  virtctl dashboard\n  virtctl dashboard -A",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.flagArgs = kubeFlagArgs(cmd)
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "VMs of every namespace")
	return cmd
}

// Run shows the dashboard until the user quits; the watches end with it.
func (o *DashboardOptions) Run(ctx context.Context) error {
	c, err := newClients(o.kube)
	if err != nil {
		return err
	}
	ns, title := c.namespace, "namespace "+c.namespace
	if o.AllNamespaces {
		ns, title = "", "all namespaces"
	}
	m := dashboard.New(title, &dashboardActions{c: c, flagArgs: o.flagArgs}, time.Now, os.Getenv("NO_COLOR") != "")
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(o.In), tea.WithOutput(o.Out))
	watchCtx, cancel := context.WithCancel(ctx)
	watched := make(chan error, 1)
	go func() { watched <- dashboard.Watch(watchCtx, c.client, ns, p.Send) }()
	_, runErr := p.Run()
	cancel()
	if err := <-watched; err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		return fmt.Errorf("dashboard: %w", runErr)
	}
	return nil
}

// dashboardActions are the dashboard's calls, through the same subresources as the commands.
type dashboardActions struct {
	c        *clients
	flagArgs []string
}

func (a *dashboardActions) in(ns string) *clients {
	c := *a.c
	c.namespace = ns
	return &c
}

func (a *dashboardActions) Start(ctx context.Context, ns, name string) error {
	return a.in(ns).put(ctx, resourceVM, name, string(actionStart), subv1.StartOptions{})
}

func (a *dashboardActions) Stop(ctx context.Context, ns, name string) error {
	return a.in(ns).put(ctx, resourceVM, name, string(actionStop), subv1.StopOptions{})
}

func (a *dashboardActions) Restart(ctx context.Context, ns, name string) error {
	return a.in(ns).put(ctx, resourceVM, name, string(actionRestart), subv1.RestartOptions{})
}

func (a *dashboardActions) Pause(ctx context.Context, ns, name string) error {
	return a.in(ns).put(ctx, resourceVMI, name, "pause", subv1.PauseOptions{})
}

func (a *dashboardActions) Unpause(ctx context.Context, ns, name string) error {
	return a.in(ns).put(ctx, resourceVMI, name, "unpause", subv1.UnpauseOptions{})
}

// Console runs this binary's console command with the same kubeconfig flags.
func (a *dashboardActions) Console(ns, name string) *exec.Cmd {
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	return exec.Command(self, append(append([]string{"console", name}, a.flagArgs...), "-n", ns)...)
}
