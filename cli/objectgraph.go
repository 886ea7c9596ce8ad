package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"

	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// ObjectGraphOptions are objectgraph: the objects a VM (or, with --vmi, an instance) owns or uses,
// from the server's objectgraph subresource, as KubeVirt's virtctl prints them.
type ObjectGraphOptions struct {
	genericiooptions.IOStreams
	clientSource

	Name            string
	VMI             bool
	ExcludeOptional bool
	Selector        map[string]string
	Output          string
}

func newObjectGraphCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &ObjectGraphOptions{IOStreams: streams, clientSource: clientSource{kube: kube}}
	cmd := &cobra.Command{
		Use:   "objectgraph (VM|VMI)",
		Short: "Returns dependency graph related to a VM|VMI.",
		Example: `  virtctl objectgraph my-vm
  virtctl objectgraph my-vmi --vmi --exclude-optional
  virtctl objectgraph my-vm --selector=kubevirt.io/dependency-type=storage -o yaml`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(kube, resourceVM),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if o.Output != "json" && o.Output != "yaml" {
				return usageError(cmd, "unsupported output format: %s (must be 'json' or 'yaml')", o.Output)
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&o.VMI, "vmi", false, "Returns the object graph from the VMI instead of the VM.")
	cmd.Flags().BoolVar(&o.ExcludeOptional, "exclude-optional", false, "Exclude optional nodes from the object graph.")
	cmd.Flags().StringToStringVar(&o.Selector, "selector", nil, "Label selectors to filter the object graph (multiple labels can be specified).")
	cmd.Flags().StringVarP(&o.Output, "output", "o", "json", "Output format. One of: json|yaml")
	return cmd
}

// Run asks the server for the graph and prints it.
func (o *ObjectGraphOptions) Run(ctx context.Context) error {
	c, err := o.connect()
	if err != nil {
		return err
	}
	opts := virtv1.ObjectGraphOptions{IncludeOptionalNodes: ptr.To(!o.ExcludeOptional)}
	if len(o.Selector) > 0 {
		opts.LabelSelector = &metav1.LabelSelector{MatchLabels: o.Selector}
	}
	resource, kind := resourceVM, "VirtualMachine"
	if o.VMI {
		resource, kind = resourceVMI, "VirtualMachineInstance"
	}
	reqBody, _ := json.Marshal(opts)
	raw, err := body(c.rest.Get().AbsPath(c.subresourcePath(resource, o.Name, subv1.ObjectGraph)).Body(reqBody).Do(ctx))
	if err != nil {
		return fmt.Errorf("error listing object graph of %s %s: %w", kind, o.Name, err)
	}
	var graph virtv1.ObjectGraphNode
	if err := json.Unmarshal(raw, &graph); err != nil {
		return fmt.Errorf("error listing object graph of %s %s: malformed answer: %w", kind, o.Name, err)
	}
	return printAs(o.Out, strings.ToLower(o.Output), &graph)
}
