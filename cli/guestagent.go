package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// GuestInfoOptions are guestosinfo, userlist and fslist: what the guest agent of a running instance
// reports, printed as indented JSON (KubeVirt's virtctl) or YAML.
type GuestInfoOptions struct {
	genericiooptions.IOStreams
	clientSource
	sub string

	Name   string
	Output string
}

func newGuestInfoCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams, use, sub, short string) *cobra.Command {
	o := &GuestInfoOptions{IOStreams: streams, clientSource: clientSource{kube: kube}, sub: sub}
	cmd := &cobra.Command{
		Use:               use + " NAME",
		Short:             short,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(kube, resourceVMI),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if o.Output != "json" && o.Output != "yaml" {
				return usageError(cmd, "--output must be json or yaml, got %q", o.Output)
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", "json", "Output format: json or yaml")
	return cmd
}

func newGuestOSInfoCommand(kube *genericclioptions.ConfigFlags, s genericiooptions.IOStreams) *cobra.Command {
	return newGuestInfoCommand(kube, s, "guestosinfo", subv1.GuestOSInfo, "Show what the guest agent reports: OS, host name, time zone, users, file systems")
}

func newUserListCommand(kube *genericclioptions.ConfigFlags, s genericiooptions.IOStreams) *cobra.Command {
	return newGuestInfoCommand(kube, s, "userlist", subv1.UserList, "List the users logged in to the guest (from the guest agent)")
}

func newFSListCommand(kube *genericclioptions.ConfigFlags, s genericiooptions.IOStreams) *cobra.Command {
	return newGuestInfoCommand(kube, s, "fslist", subv1.FileSystemList, "List the guest's file systems (from the guest agent)")
}

// Run reads the subresource and prints it.
func (o *GuestInfoOptions) Run(ctx context.Context) error {
	c, err := o.connect()
	if err != nil {
		return err
	}
	raw, err := body(c.rest.Get().AbsPath(c.subresourcePath(resourceVMI, o.Name, o.sub)).Do(ctx))
	if err != nil {
		return fmt.Errorf("%s of VirtualMachineInstance %s: %w", o.sub, o.Name, err)
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return fmt.Errorf("%s of VirtualMachineInstance %s: malformed answer: %w", o.sub, o.Name, err)
	}
	return printAs(o.Out, o.Output, obj)
}

// printAs writes obj as YAML or as indented JSON (KubeVirt's virtctl's format for what it prints).
func printAs(w io.Writer, format string, obj any) error {
	var out []byte
	var err error
	if format == "yaml" {
		out, err = yaml.Marshal(obj)
	} else {
		out, err = json.MarshalIndent(obj, "", "  ")
		out = append(out, '\n')
	}
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// FreezeOptions are freeze and unfreeze: the guest agent freezes (or thaws) the guest's file systems.
type FreezeOptions struct {
	genericiooptions.IOStreams
	clientSource
	sub string

	Name            string
	UnfreezeTimeout time.Duration
}

func newFreezeCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	return newFreezeOrThawCommand(kube, streams, subv1.Freeze, "Freeze the guest's file systems through the guest agent (for a consistent snapshot)")
}

func newUnfreezeCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	return newFreezeOrThawCommand(kube, streams, subv1.Unfreeze, "Thaw the guest's file systems after a freeze")
}

func newFreezeOrThawCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams, sub, short string) *cobra.Command {
	o := &FreezeOptions{IOStreams: streams, clientSource: clientSource{kube: kube}, sub: sub}
	cmd := &cobra.Command{
		Use:               sub + " NAME",
		Short:             short,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(kube, resourceVMI),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if _, err := launcherv1.FreezeRequestFor(&metav1.Duration{Duration: o.UnfreezeTimeout}); err != nil {
				return usageError(cmd, "--unfreeze-timeout: %v", err)
			}
			return o.Run(cmd.Context())
		},
	}
	o.UnfreezeTimeout = launcherv1.DefaultUnfreezeTimeoutSeconds * time.Second
	if sub == subv1.Freeze {
		cmd.Flags().DurationVar(&o.UnfreezeTimeout, "unfreeze-timeout", o.UnfreezeTimeout, "Thaw the file systems by themselves after this long unless unfrozen before")
	}
	return cmd
}

// Run makes the call.
func (o *FreezeOptions) Run(ctx context.Context) error {
	c, err := o.connect()
	if err != nil {
		return err
	}
	body := any(struct{}{})
	if o.sub == subv1.Freeze {
		body = virtv1.FreezeUnfreezeTimeout{UnfreezeTimeout: &metav1.Duration{Duration: o.UnfreezeTimeout}}
	}
	if err := c.put(ctx, resourceVMI, o.Name, o.sub, body); err != nil {
		return err
	}
	done := "frozen"
	if o.sub == subv1.Unfreeze {
		done = "thawed"
	}
	fmt.Fprintf(o.Out, "VMI %s: file systems %s\n", o.Name, done)
	return nil
}

// ExecOptions are exec: a command runs in the guest through its guest agent; its output goes to
// stdout and stderr, and virtctl exits with its exit code (as kubectl exec).
type ExecOptions struct {
	genericiooptions.IOStreams
	clientSource

	Name    string
	Command []string
	Stdin   bool
	Timeout time.Duration
}

func newExecCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &ExecOptions{IOStreams: streams, clientSource: clientSource{kube: kube}}
	cmd := &cobra.Command{
		Use:   "exec NAME [flags] -- COMMAND [ARG...]",
		Short: "Run a command in the guest through its guest agent, exiting with its exit code",
		Example: `  # Run a command in the guest of vm1 and print its output
  virtctl exec vm1 -- uname -a

  # Feed it standard input
  echo hello | virtctl exec vm1 -i -- cat`,
		ValidArgsFunction: completeNames(kube, resourceVMI),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(cmd, args); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVarP(&o.Stdin, "stdin", "i", false, fmt.Sprintf("Pass standard input to the command (at most %d KiB)", subv1.MaxExecInputBytes>>10))
	cmd.Flags().DurationVar(&o.Timeout, "timeout", subv1.DefaultExecTimeoutSeconds*time.Second,
		fmt.Sprintf("How long to wait for the command to exit (at most %s; exit code 124 when it runs out, the command runs on)", subv1.MaxExecTimeoutSeconds*time.Second))
	return cmd
}

// Complete reads NAME and the command after "--", and checks the flags.
func (o *ExecOptions) Complete(cmd *cobra.Command, args []string) error {
	dash := cmd.ArgsLenAtDash()
	switch {
	case dash != 1 || len(args) < 2:
		return usageError(cmd, "want NAME -- COMMAND [ARG...]")
	case o.Timeout < time.Second || o.Timeout > subv1.MaxExecTimeoutSeconds*time.Second:
		return usageError(cmd, "--timeout must be between 1s and %s, got %s", subv1.MaxExecTimeoutSeconds*time.Second, o.Timeout)
	}
	o.Name, o.Command = args[0], args[1:]
	req := subv1.ExecRequest{Command: o.Command}
	if err := req.Validate(); err != nil {
		return usageError(cmd, "%v", err)
	}
	return nil
}

// Run sends the command and prints what it wrote; a non-zero exit code is virtctl's.
func (o *ExecOptions) Run(ctx context.Context) error {
	req := subv1.ExecRequest{Command: o.Command, TimeoutSeconds: int64(o.Timeout / time.Second)}
	if o.Stdin {
		in, err := io.ReadAll(io.LimitReader(o.In, subv1.MaxExecInputBytes+1))
		if err != nil {
			return fmt.Errorf("read standard input: %w", err)
		}
		if len(in) > subv1.MaxExecInputBytes {
			return fmt.Errorf("--stdin: standard input is larger than %d bytes, the limit", subv1.MaxExecInputBytes)
		}
		req.Stdin = in
	}
	c, err := o.connect()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout+2*launcherv1.ExecGrace)
	defer cancel()
	res, err := c.exec(ctx, o.Name, &req)
	if err != nil {
		return err
	}
	if _, err := o.Out.Write(res.Stdout); err != nil {
		return err
	}
	if _, err := o.ErrOut.Write(res.Stderr); err != nil {
		return err
	}
	if res.StdoutTruncated || res.StderrTruncated {
		fmt.Fprintf(o.ErrOut, "warning: the command's output was cut at %d bytes per stream\n", subv1.MaxExecOutputBytes)
	}
	if res.ExitCode != 0 {
		code := res.ExitCode
		if code < 0 || code > 255 { // not a process exit code: still a failure
			code = 255
		}
		return &exitError{code: code, err: fmt.Errorf("command terminated with exit code %d", res.ExitCode)}
	}
	return nil
}

// exec runs req in the guest of the instance name (the wait for the answer bounded by ctx); a
// command that did not exit in time is a timeout (exit code 124).
func (c *clients) exec(ctx context.Context, name string, req *subv1.ExecRequest) (*subv1.ExecResult, error) {
	raw, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	reply, err := body(c.rest.Post().AbsPath(c.subresourcePath(resourceVMI, name, subv1.Exec)).Body(raw).Do(ctx))
	if err != nil {
		if isServerTimeout(err) {
			return nil, timeout(fmt.Errorf("exec in VirtualMachineInstance %s: %w", name, err))
		}
		return nil, fmt.Errorf("exec in VirtualMachineInstance %s: %w", name, err)
	}
	var res subv1.ExecResult
	if err := json.NewDecoder(bytes.NewReader(reply)).Decode(&res); err != nil {
		return nil, fmt.Errorf("exec in VirtualMachineInstance %s: malformed answer: %w", name, err)
	}
	return &res, nil
}

// body is a call's answer, or its error as the server's Status says it (Raw alone gives a generic
// one for any status code).
func body(r rest.Result) ([]byte, error) {
	if err := r.Error(); err != nil {
		return nil, err
	}
	return r.Raw()
}

// isServerTimeout: the server said the command did not exit in time, or the wait for its answer
// ran out.
func isServerTimeout(err error) bool {
	return apierrors.IsTimeout(err) || errors.Is(err, context.DeadlineExceeded)
}
