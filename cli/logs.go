package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// LogsOptions is `logs [vm|vmi] NAME`: what the guest printed on its serial console since its
// instance started (the launcher Pod's console-log container), without attaching to the console.
type LogsOptions struct {
	genericiooptions.IOStreams
	clientSource

	Target target
	Follow bool
}

func newLogsCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &LogsOptions{IOStreams: streams, clientSource: clientSource{kube: kube}}
	cmd := &cobra.Command{
		Use:     "logs [vm|vmi] NAME",
		Short:   "Print the guest's serial console output (its boot log) without attaching",
		Example: "  virtctl logs my-vm\n  virtctl logs vmi my-vm -f",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := targetArgs(cmd, args)
			if err != nil {
				return err
			}
			o.Target = t
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVarP(&o.Follow, "follow", "f", false, "Keep printing what the guest prints")
	return cmd
}

// Run finds the instance's launcher Pod and copies its console log.
func (o *LogsOptions) Run(ctx context.Context) error {
	c, err := o.connectTo(o.Target)
	if err != nil {
		return err
	}
	vmi := &virtv1.VirtualMachineInstance{}
	if err := c.client.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: o.Target.name}, vmi); err != nil {
		return fmt.Errorf("the instance of %s: %w", o.Target.name, err)
	}
	if vmi.Status.LauncherPod == "" {
		return fmt.Errorf("vmi/%s has no launcher Pod yet (phase %q): nothing was printed", vmi.Name, vmi.Status.Phase)
	}
	req := c.kube.CoreV1().Pods(c.namespace).GetLogs(vmi.Status.LauncherPod,
		&corev1.PodLogOptions{Container: launcherv1.ConsoleLogContainer, Follow: o.Follow})
	stream, err := req.Stream(ctx)
	if err != nil {
		return fmt.Errorf("console log of vmi/%s (Pod %s): %w", vmi.Name, vmi.Status.LauncherPod, err)
	}
	defer stream.Close()
	_, err = io.Copy(o.Out, stream)
	return err
}
