package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/instancetype"
)

// ExpandOptions are expand: a VirtualMachine with its instancetype and preference applied to its
// template (KubeVirt's virtctl expand): a stored VM through the server's expand-spec, or a manifest
// expanded here with the same code and the instancetypes and preferences the user may read.
type ExpandOptions struct {
	genericiooptions.IOStreams
	clientSource

	VM     string
	File   string
	Output string
}

// maxManifest bounds a manifest read by expand.
const maxManifest = 1 << 20

func newExpandCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &ExpandOptions{IOStreams: streams, clientSource: clientSource{kube: kube}}
	cmd := &cobra.Command{
		Use:   "expand (--vm NAME | --file FILE)",
		Short: "Print a VirtualMachine with its instancetype and preference applied to its template",
		Example: `  virtctl expand --vm my-vm
  virtctl create vm --instancetype u1.small --volume-containerdisk src:my/image | virtctl expand -f - -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case (o.VM == "") == (o.File == ""):
				return usageError(cmd, "give one of --vm and --file")
			case o.Output != "yaml" && o.Output != "json":
				return usageError(cmd, "--output must be yaml or json, got %q", o.Output)
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&o.VM, "vm", "", "The VirtualMachine to expand")
	cmd.Flags().StringVarP(&o.File, "file", "f", "", "A VirtualMachine manifest to expand (- for stdin)")
	cmd.Flags().StringVarP(&o.Output, "output", "o", "yaml", "Output format: yaml or json")
	_ = cmd.RegisterFlagCompletionFunc("vm", completeNames(kube, resourceVM))
	return cmd
}

// Run expands and prints.
func (o *ExpandOptions) Run(ctx context.Context) error {
	c, err := o.connect()
	if err != nil {
		return err
	}
	var vm *virtv1.VirtualMachine
	if o.VM != "" {
		raw, err := body(c.rest.Get().AbsPath(c.subresourcePath(resourceVM, o.VM, subv1.ExpandSpec)).Do(ctx))
		if err != nil {
			return fmt.Errorf("expand VirtualMachine %s: %w", o.VM, err)
		}
		vm = &virtv1.VirtualMachine{}
		if err := json.Unmarshal(raw, vm); err != nil {
			return fmt.Errorf("expand VirtualMachine %s: malformed answer: %w", o.VM, err)
		}
	} else {
		in, err := o.manifest()
		if err != nil {
			return err
		}
		if in.Namespace == "" {
			in.Namespace = c.namespace
		}
		if vm, err = instancetype.ExpandVM(ctx, c.client, in); err != nil {
			return fmt.Errorf("expand VirtualMachine %s: %w", in.Name, err)
		}
	}
	vm.ManagedFields = nil
	return printAs(o.Out, o.Output, vm)
}

// manifest reads --file (- for stdin): one VirtualMachine, YAML or JSON, at most maxManifest bytes.
func (o *ExpandOptions) manifest() (*virtv1.VirtualMachine, error) {
	r := o.In
	if o.File != "-" {
		f, err := os.Open(o.File)
		if err != nil {
			return nil, fmt.Errorf("--file: %w", err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxManifest+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("--file: %w", err)
	case len(data) > maxManifest:
		return nil, fmt.Errorf("--file: larger than %d bytes", maxManifest)
	}
	docs := 0
	for rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data))); ; {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("--file: %w", err)
		}
		if len(bytes.TrimSpace(doc)) > 0 && string(bytes.TrimSpace(doc)) != "---" {
			docs++
		}
	}
	if docs > 1 {
		return nil, fmt.Errorf("--file: %d documents, want one VirtualMachine", docs)
	}
	vm := &virtv1.VirtualMachine{}
	if err := yaml.UnmarshalStrict(data, vm); err != nil {
		return nil, fmt.Errorf("--file: not a VirtualMachine: %w", err)
	}
	if vm.Kind != "VirtualMachine" {
		return nil, fmt.Errorf("--file: kind %q, want VirtualMachine", vm.Kind)
	}
	return vm, nil
}
