package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Exit codes (README: "Exit codes").
const (
	ExitOK      = 0
	ExitError   = 1
	ExitTimeout = 124 // as timeout(1): a wait or --expect ran out of time
)

// ExitError carries the exit code of a failure other than ExitError.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// timeout marks err as a timeout (exit code ExitTimeout).
func timeout(err error) error { return &exitError{code: ExitTimeout, err: err} }

// ExitCode is the process exit code for err (nil: ExitOK).
func ExitCode(err error) int {
	var e *exitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &e):
		return e.code
	default:
		return ExitError
	}
}

// CommandName is how the user invoked the binary: "kubectl virt" when installed as the kubectl
// plugin kubectl-virt, else "virtctl".
func CommandName(arg0 string) string {
	base := strings.TrimSuffix(filepath.Base(arg0), ".exe")
	if base == "kubectl-virt" {
		return "kubectl virt"
	}
	return "virtctl"
}

// NewCommand is virtctl's root command, named name (CommandName) in help and errors.
func NewCommand(name string, streams genericiooptions.IOStreams) *cobra.Command {
	kube := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{
		Use:           strings.ReplaceAll(name, " ", "-"),
		Short:         "Drive KubeVirt virtual machines: start, stop, console, and more",
		SilenceUsage:  true,
		SilenceErrors: true, // main prints the error once
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: name},
	}
	root.CompletionOptions.HiddenDefaultCmd = false
	kube.AddFlags(root.PersistentFlags())
	for _, newCmd := range []func(*genericclioptions.ConfigFlags, genericiooptions.IOStreams) *cobra.Command{
		newStartCommand, newStopCommand, newRestartCommand, newPauseCommand, newUnpauseCommand,
		newSoftRebootCommand, newResetCommand, newMigrateCommand, newMigrateCancelCommand, newConsoleCommand, newVNCCommand, newPortForwardCommand,
		newLogsCommand, newExposeCommand, newCreateCommand, newSSHCommand, newSCPCommand, newDashboardCommand, newVersionCommand,
		newGuestOSInfoCommand, newUserListCommand, newFSListCommand, newFreezeCommand, newUnfreezeCommand, newExecCommand,
		newExpandCommand, newCredentialsCommand, newObjectGraphCommand, newPermittedDevicesCommand,
	} {
		root.AddCommand(newCmd(kube, streams))
	}
	root.AddCommand(newUnavailableCommands(kube, streams)...)
	if name != "virtctl" {
		renameExamples(root, name)
	}
	return root
}

// renameExamples makes the examples say how the user invoked the binary (kubectl virt).
func renameExamples(cmd *cobra.Command, name string) {
	cmd.Example = strings.ReplaceAll(cmd.Example, "virtctl ", name+" ")
	for _, c := range cmd.Commands() {
		renameExamples(c, name)
	}
}

// usageError is a flag or argument error, reported before any request is made.
func usageError(cmd *cobra.Command, format string, args ...any) error {
	return fmt.Errorf("%s: %s (see '%s --help')", cmd.CommandPath(), fmt.Sprintf(format, args...), cmd.CommandPath())
}
