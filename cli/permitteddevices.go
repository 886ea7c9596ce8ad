package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/termsafe"
)

// PermittedDevicesOptions is permitted-devices: the host devices the cluster's KubeVirt object
// permits instances to ask for (spec.configuration.permittedHostDevices), as KubeVirt's virtctl
// prints them.
type PermittedDevicesOptions struct {
	genericiooptions.IOStreams
	clientSource
}

func newPermittedDevicesCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &PermittedDevicesOptions{IOStreams: streams, clientSource: clientSource{kube: kube}}
	return &cobra.Command{
		Use:     "permitted-devices",
		Short:   "List the permitted devices for vmis.",
		Example: "  virtctl permitted-devices -n podvirt",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return o.Run(cmd.Context()) },
	}
}

// Run reads the KubeVirt object of the namespace (-n; KubeVirt's virtctl looks there too) and prints
// its permitted PCI and mediated devices.
func (o *PermittedDevicesOptions) Run(ctx context.Context) error {
	c, err := o.connect()
	if err != nil {
		return err
	}
	// Read as it is stored: Podvirt keeps the settings it does not honour (these among them) as given.
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(virtv1.GroupVersion.WithKind("KubeVirtList"))
	if err := c.client.List(ctx, list, client.InNamespace(c.namespace)); err != nil {
		return fmt.Errorf("cannot obtain KubeVirt client: %w", err)
	}
	if len(list.Items) == 0 {
		return fmt.Errorf("no KubeVirt resource in %q namespace", c.namespace)
	}
	names := func(field string) []string {
		devices, _, _ := unstructured.NestedSlice(list.Items[0].Object, "spec", "configuration", "permittedHostDevices", field)
		var out []string
		for _, d := range devices {
			if m, ok := d.(map[string]any); ok {
				if name, ok := m["resourceName"].(string); ok {
					out = append(out, termsafe.Line(name))
				}
			}
		}
		return out
	}
	host, gpu := names("pciHostDevices"), names("mediatedDevices")
	fmt.Fprintf(o.Out, "Permitted Devices: \nHost Devices: \n%s \nGPU Devices: \n%s\n", strings.Join(host, ", "), strings.Join(gpu, ", "))
	return nil
}
