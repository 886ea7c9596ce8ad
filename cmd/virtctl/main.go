// Command virtctl is Podvirt's command line (cli/); installed as kubectl-virt it is `kubectl virt`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/podvirt/podvirt/cli"
)

func main() {
	name := cli.CommandName(os.Args[0])
	cmd := cli.NewCommand(name, genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
	}
	os.Exit(cli.ExitCode(err))
}
