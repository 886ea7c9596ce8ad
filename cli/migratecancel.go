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
// which aborts it (the guest stays where it runs), as KubeVirt's virtctl does.
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

// Run deletes the instance's migration that has not ended; it is an error when there is none. The
// delete is conditional on the migration being as read (uid and resourceVersion), so one that ends
// meanwhile is read again, not deleted (at most cancelAttempts reads).
func (o *MigrateCancelOptions) Run(ctx context.Context) error {
	c, err := o.connect()
	if err != nil {
		return err
	}
	o.c = c
	for range cancelAttempts {
		m, err := o.inProgress(ctx)
		if err != nil {
			return err
		}
		opts := []client.DeleteOption{client.Preconditions{UID: &m.UID, ResourceVersion: &m.ResourceVersion}}
		if o.DryRun {
			opts = append(opts, client.DryRunAll)
		}
		switch err := o.c.client.Delete(ctx, m, opts...); {
		case apierrors.IsConflict(err), apierrors.IsNotFound(err):
			continue // it changed or went: read again
		case err != nil:
			return fmt.Errorf("cancel migration %s of vmi/%s: %w", m.Name, o.Name, err)
		}
		suffix := ""
		if o.DryRun {
			suffix = " (dry run)"
		}
		fmt.Fprintf(o.Out, "VM %s was scheduled to migrate-cancel%s (migration %s)\n", o.Name, suffix, m.Name)
		return nil
	}
	return fmt.Errorf("the migration of vmi/%s kept changing while it was being cancelled (%d attempts); try again", o.Name, cancelAttempts)
}

// cancelAttempts bounds Run's reads of a migration that changes under it.
const cancelAttempts = 5

// inProgress reads the instance's migration that has not ended. Migrations are matched by
// spec.vmiName (every migration has it; the kubevirt.io/vmi-name label that KubeVirt's virtctl
// selects by is missing on migrations made before admission set it, and for names too long for a
// label).
func (o *MigrateCancelOptions) inProgress(ctx context.Context) (*virtv1.VirtualMachineInstanceMigration, error) {
	list := &virtv1.VirtualMachineInstanceMigrationList{}
	if err := o.c.client.List(ctx, list, client.InNamespace(o.c.namespace)); err != nil {
		return nil, fmt.Errorf("list the migrations of vmi/%s: %w", o.Name, err)
	}
	for i := range list.Items {
		if m := &list.Items[i]; m.Spec.VMIName == o.Name && !m.Status.Phase.IsFinal() {
			return m, nil
		}
	}
	return nil, fmt.Errorf("vmi/%s has no migration in progress to cancel", o.Name)
}
