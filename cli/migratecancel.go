package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// MigrateCancelOptions is `migrate-cancel NAME`: it deletes the instance's migration in progress,
// which aborts it (the guest stays where it runs), as KubeVirt's virtctl does: the migration is
// found by its kubevirt.io/vmi-name label, which admission sets.
type MigrateCancelOptions struct {
	genericiooptions.IOStreams
	clientSource

	Name   string
	DryRun bool

	c *clients
}

func newMigrateCancelCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &MigrateCancelOptions{IOStreams: streams, clientSource: clientSource{kube: kube}}
	cmd := &cobra.Command{
		Use:               "migrate-cancel NAME",
		Short:             "Cancel the live migration of a virtual machine in progress (the guest stays where it runs)",
		Example:           "  virtctl migrate-cancel my-vm",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(kube, resourceVMI),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "Validate the request without changing anything")
	return cmd
}

// Run deletes the first migration of the instance that has not ended; it is an error when there is none.
func (o *MigrateCancelOptions) Run(ctx context.Context) error {
	c, err := o.connect()
	if err != nil {
		return err
	}
	o.c = c
	list := &virtv1.VirtualMachineInstanceMigrationList{}
	if err := o.c.client.List(ctx, list, client.InNamespace(o.c.namespace), client.MatchingLabels{virtv1.MigrationSelectorLabel: o.Name}); err != nil {
		return fmt.Errorf("list the migrations of vmi/%s: %w", o.Name, err)
	}
	for i := range list.Items {
		m := &list.Items[i]
		if m.Status.Phase.IsFinal() {
			continue
		}
		opts := []client.DeleteOption{client.Preconditions{UID: &m.UID}}
		if o.DryRun {
			opts = append(opts, client.DryRunAll)
		}
		if err := o.c.client.Delete(ctx, m, opts...); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("cancel migration %s of vmi/%s: %w", m.Name, o.Name, err)
		}
		suffix := ""
		if o.DryRun {
			suffix = " (dry run)"
		}
		fmt.Fprintf(o.Out, "VM %s was scheduled to migrate-cancel%s (migration %s)\n", o.Name, suffix, m.Name)
		return nil
	}
	return fmt.Errorf("vmi/%s has no migration in progress to cancel", o.Name)
}
