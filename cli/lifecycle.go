package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// DefaultWaitTimeout bounds --wait unless --timeout says otherwise.
const DefaultWaitTimeout = 5 * time.Minute

// action is one of the VM lifecycle calls.
type action string

const (
	actionStart   action = subv1.Start
	actionStop    action = subv1.Stop
	actionRestart action = subv1.Restart
)

// LifecycleOptions are start, stop and restart: a subresource call on a VirtualMachine, then
// optionally waiting (with progress) until it took effect.
type LifecycleOptions struct {
	genericiooptions.IOStreams
	clientSource
	action action

	Name        string
	Paused      bool
	DryRun      bool
	Force       bool
	GracePeriod int64 // -1: not given
	Wait        bool
	Timeout     time.Duration
	// For is what start and restart --wait wait for: WaitForRunning, WaitForAgent or WaitForReady.
	For string

	c *clients
}

// What start and restart --wait can wait for.
const (
	// WaitForRunning: the instance runs (the guest may still be booting).
	WaitForRunning = "running"
	// WaitForAgent: the guest's agent is connected (the AgentConnected condition): the guest has booted
	// far enough to run commands (virtctl exec).
	WaitForAgent = "agent"
	// WaitForReady: the instance's Ready condition: its launcher Pod ready, readiness probes passing.
	WaitForReady = "ready"
)

// hasKey reports whether m has k.
func hasKey[V any](m map[string]V, k string) bool { _, ok := m[k]; return ok }

// waitConditions is the instance condition each --for waits for ("": none, running is enough).
var waitConditions = map[string]string{
	WaitForRunning: "", WaitForAgent: virtv1.VirtualMachineInstanceAgentConnected, WaitForReady: virtv1.VirtualMachineInstanceReady,
}

func newLifecycleCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams, a action, short, example string) *cobra.Command {
	o := &LifecycleOptions{IOStreams: streams, clientSource: clientSource{kube: kube}, action: a, GracePeriod: -1}
	cmd := &cobra.Command{
		Use:               string(a) + " NAME",
		Short:             short,
		Example:           example,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(kube, resourceVM),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(args); err != nil {
				return err
			}
			if err := o.Validate(cmd); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.DryRun, "dry-run", false, "Validate the request without changing anything")
	f.BoolVar(&o.Wait, "wait", false, "Wait until the change took effect, showing progress")
	f.DurationVar(&o.Timeout, "timeout", DefaultWaitTimeout, "How long --wait waits (exit code 124 when it runs out)")
	switch a {
	case actionStart:
		f.BoolVar(&o.Paused, "paused", false, "Start the VM paused")
	case actionStop, actionRestart:
		f.BoolVar(&o.Force, "force", false, "Stop the VM without waiting for the guest to shut down (needs --grace-period)")
		f.Int64Var(&o.GracePeriod, "grace-period", -1, "Seconds the guest gets to shut down (with --force; 0 stops it at once)")
	}
	if a != actionStop {
		f.StringVar(&o.For, "for", WaitForRunning, "With --wait, what to wait for: running (the instance runs), agent (the guest agent is connected) or ready (its Ready condition: readiness probes pass)")
	}
	return cmd
}

func newStartCommand(kube *genericclioptions.ConfigFlags, s genericiooptions.IOStreams) *cobra.Command {
	return newLifecycleCommand(kube, s, actionStart, "Start a virtual machine", "  virtctl start my-vm --wait")
}

func newStopCommand(kube *genericclioptions.ConfigFlags, s genericiooptions.IOStreams) *cobra.Command {
	return newLifecycleCommand(kube, s, actionStop, "Stop a virtual machine", "  virtctl stop my-vm --wait\n  virtctl stop my-vm --force --grace-period=0")
}

func newRestartCommand(kube *genericclioptions.ConfigFlags, s genericiooptions.IOStreams) *cobra.Command {
	return newLifecycleCommand(kube, s, actionRestart, "Restart a virtual machine (a new instance)", "  virtctl restart my-vm --wait")
}

// Complete reads the argument.
func (o *LifecycleOptions) Complete(args []string) error {
	o.Name = args[0]
	return nil
}

// Validate checks the flags before any request (KubeVirt: a forced stop needs a grace period).
func (o *LifecycleOptions) Validate(cmd *cobra.Command) error {
	switch {
	case o.Force && o.GracePeriod < 0:
		return usageError(cmd, "--force needs --grace-period (e.g. --grace-period=0 to stop at once)")
	case !o.Force && o.GracePeriod >= 0:
		return usageError(cmd, "--grace-period is only used with --force")
	case o.GracePeriod > virtv1.MaxGracePeriodSeconds:
		return usageError(cmd, "--grace-period must be at most %d seconds, got %d", virtv1.MaxGracePeriodSeconds, o.GracePeriod)
	case o.Timeout <= 0:
		return usageError(cmd, "--timeout must be positive, got %s", o.Timeout)
	case o.Wait && o.DryRun:
		return usageError(cmd, "--wait and --dry-run do not go together (a dry run changes nothing to wait for)")
	case o.For != "" && !hasKey(waitConditions, o.For):
		return usageError(cmd, "--for must be %s, %s or %s, got %q", WaitForRunning, WaitForAgent, WaitForReady, o.For)
	case cmd.Flags().Changed("for") && !o.Wait:
		return usageError(cmd, "--for needs --wait")
	}
	return nil
}

// Run makes the call and, with --wait, waits for its effect.
func (o *LifecycleOptions) Run(ctx context.Context) error {
	c, err := o.connect()
	if err != nil {
		return err
	}
	o.c = c
	dry := dryRun(o.DryRun)
	var grace *int64
	if o.Force {
		grace = ptr.To(o.GracePeriod)
	}
	var body any
	switch o.action {
	case actionStart:
		body = subv1.StartOptions{Paused: o.Paused, DryRun: dry}
	case actionStop:
		body = subv1.StopOptions{GracePeriod: grace, DryRun: dry}
	case actionRestart:
		body = subv1.RestartOptions{GracePeriodSeconds: grace, DryRun: dry}
	}
	var before string // the instance a restart replaces
	if o.action == actionRestart && o.Wait {
		vmi := &virtv1.VirtualMachineInstance{}
		if err := o.c.client.Get(ctx, client.ObjectKey{Namespace: o.c.namespace, Name: o.Name}, vmi); err == nil {
			before = string(vmi.UID)
		}
	}
	if err := o.c.put(ctx, resourceVM, o.Name, string(o.action), body); err != nil {
		return err
	}
	suffix := ""
	if o.DryRun {
		suffix = " (dry run)"
	}
	fmt.Fprintf(o.Out, "VM %s was scheduled to %s%s\n", o.Name, o.action, suffix)
	if !o.Wait {
		return nil
	}
	w := &waiter{c: o.c, name: o.Name, out: o.Out, timeout: o.Timeout, tty: isTerminal(o.Out)}
	if o.action == actionStop {
		return w.stopped(ctx)
	}
	return w.running(ctx, before, waitConditions[o.For])
}
