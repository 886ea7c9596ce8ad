package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
)

// VersionOptions is `version`: this binary's version and, unless --client, the server's
// (subresources.kubevirt.io/v1/version, as KubeVirt's virtctl).
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
	fmt.Fprintf(o.Out, "Client Version: %s\n", clientVersion())
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
	var v version.Info
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("server version: %w", err)
	}
	fmt.Fprintf(o.Out, "Server Version: %s\n", v.String())
	return nil
}

// clientVersion is the module version and VCS revision Go embedded in this binary.
func clientVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " (" + s.Value[:12] + ")"
		}
	}
	return v
}
