package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	podvirtversion "github.com/podvirt/podvirt/internal/version"
)

// VersionOptions is `version`: this binary's version and, unless --client, the server's
// (subresources.kubevirt.io/v1/version), printed as KubeVirt's virtctl prints them.
type VersionOptions struct {
	genericiooptions.IOStreams
	clientSource
	ClientOnly bool
}

func newVersionCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &VersionOptions{IOStreams: streams, clientSource: clientSource{kube: kube}}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the client and server version",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return o.Run(cmd.Context()) },
	}
	cmd.Flags().BoolVar(&o.ClientOnly, "client", false, "Print only the client's version (no cluster needed)")
	return cmd
}

// Run prints the versions.
func (o *VersionOptions) Run(ctx context.Context) error {
	fmt.Fprintf(o.Out, "Client Version: %#v\n", podvirtversion.Get())
	if o.ClientOnly {
		return nil
	}
	c, err := o.connect()
	if err != nil {
		return err
	}
	raw, err := c.rest.Get().AbsPath("/apis/" + subv1.GroupName + "/v1/version").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("server version: %w", err)
	}
	var v podvirtversion.Info
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("server version: %w", err)
	}
	fmt.Fprintf(o.Out, "Server Version: %#v\n", v)
	return nil
}
