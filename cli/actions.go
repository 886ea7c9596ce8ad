package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// ActionOptions are pause, unpause, softreboot, reset and migrate: one subresource call on a running
// instance (pause/unpause take `vm NAME` or `vmi NAME`, as KubeVirt's virtctl; both reach the
// instance of that name).
type ActionOptions struct {
	genericiooptions.IOStreams
	clientSource
	sub string
	// kinds says whether the command takes "vm|vmi NAME" (true) or just NAME.
	kinds bool

	Name    string
	DryRun  bool
	Wait    bool // migrate: wait for the migration to end
	Timeout time.Duration

	c *clients
}

func newActionCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams, sub string, kinds bool, short string) *cobra.Command {
	o := &ActionOptions{IOStreams: streams, clientSource: clientSource{kube: kube}, sub: sub, kinds: kinds}
	use, args := sub+" NAME", cobra.ExactArgs(1)
	if kinds {
		use, args = sub+" (vm|vmi) NAME", cobra.ExactArgs(2)
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(cmd, args); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	if sub != subv1.SoftReboot && sub != subv1.Reset { // KubeVirt's virtctl has no --dry-run for them
		cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "Validate the request without changing anything")
	}
	if sub == subv1.Migrate {
		cmd.Flags().BoolVar(&o.Wait, "wait", false, "Wait until the migration succeeds or fails, showing its phases")
		cmd.Flags().DurationVar(&o.Timeout, "timeout", DefaultWaitTimeout, "How long --wait waits (exit code 124 when it runs out)")
	}
	return cmd
}

func newPauseCommand(kube *genericclioptions.ConfigFlags, s genericiooptions.IOStreams) *cobra.Command {
	return newActionCommand(kube, s, subv1.Pause, true, "Pause a running virtual machine (its clock stops)")
}

func newUnpauseCommand(kube *genericclioptions.ConfigFlags, s genericiooptions.IOStreams) *cobra.Command {
	return newActionCommand(kube, s, subv1.Unpause, true, "Resume a paused virtual machine")
}

func newSoftRebootCommand(kube *genericclioptions.ConfigFlags, s genericiooptions.IOStreams) *cobra.Command {
	cmd := newActionCommand(kube, s, subv1.SoftReboot, false, "Reboot a running instance through its guest agent, else ACPI (the instance stays)")
	cmd.Aliases = []string{"soft-reboot"} // KubeVirt's virtctl's name for it
	return cmd
}

func newResetCommand(kube *genericclioptions.ConfigFlags, s genericiooptions.IOStreams) *cobra.Command {
	return newActionCommand(kube, s, subv1.Reset, false, "Reset a running instance: the guest restarts at once, without shutting down (the instance stays)")
}

func newMigrateCommand(kube *genericclioptions.ConfigFlags, s genericiooptions.IOStreams) *cobra.Command {
	return newActionCommand(kube, s, subv1.Migrate, false, "Ask for a live migration of a running virtual machine")
}

// Complete reads the arguments, checking the kind.
func (o *ActionOptions) Complete(cmd *cobra.Command, args []string) error {
	o.Name = args[len(args)-1]
	switch {
	case o.kinds && args[0] != "vm" && args[0] != "vmi":
		return usageError(cmd, "the first argument must be vm or vmi, got %q", args[0])
	case o.Wait && o.DryRun:
		return usageError(cmd, "--wait and --dry-run do not go together (a dry run changes nothing to wait for)")
	case o.Wait && o.Timeout <= 0:
		return usageError(cmd, "--timeout must be positive, got %s", o.Timeout)
	}
	return nil
}

// Run makes the call.
func (o *ActionOptions) Run(ctx context.Context) error {
	c, err := o.connect()
	if err != nil {
		return err
	}
	o.c = c
	dry := dryRun(o.DryRun)
	resource, body := resourceVMI, any(struct{}{})
	switch o.sub {
	case subv1.Pause:
		body = subv1.PauseOptions{DryRun: dry}
	case subv1.Unpause:
		body = subv1.UnpauseOptions{DryRun: dry}
	case subv1.Migrate:
		resource, body = resourceVM, subv1.MigrateOptions{DryRun: dry}
	}
	since := metav1.Now()
	since.Time = since.Add(-time.Second) // the server's clock may trail ours a little
	if err := o.c.put(ctx, resource, o.Name, o.sub, body); err != nil {
		return err
	}
	kind := "VMI"
	if resource == resourceVM {
		kind = "VM"
	}
	fmt.Fprintf(o.Out, "%s %s was scheduled to %s\n", kind, o.Name, o.sub)
	if !o.Wait {
		return nil
	}
	w := &waiter{c: o.c, name: o.Name, out: o.Out, timeout: o.Timeout, tty: isTerminal(o.Out)}
	return w.migrated(ctx, since)
}

// completeNames completes NAME with the VMs or instances of the namespace.
func completeNames(kube *genericclioptions.ConfigFlags, resource string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := newClients(kube)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var names []string
		if resource == resourceVM {
			list := &virtv1.VirtualMachineList{}
			if err := c.client.List(cmd.Context(), list, client.InNamespace(c.namespace)); err != nil {
				return nil, cobra.ShellCompDirectiveError
			}
			for _, vm := range list.Items {
				names = append(names, vm.Name)
			}
		} else {
			list := &virtv1.VirtualMachineInstanceList{}
			if err := c.client.List(cmd.Context(), list, client.InNamespace(c.namespace)); err != nil {
				return nil, cobra.ShellCompDirectiveError
			}
			for _, vmi := range list.Items {
				names = append(names, vmi.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
