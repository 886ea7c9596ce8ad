// Command virtctl is Podvirt's command line (cli/); installed as kubectl-virt it is `kubectl virt`.
package main

import (
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/podvirt/podvirt/cli"
)

func main() {
	name := cli.CommandName(os.Args[0])
	cmd := cli.NewCommand(name, genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	err := cmd.Execute()
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
	}
	os.Exit(cli.ExitCode(err))
}
