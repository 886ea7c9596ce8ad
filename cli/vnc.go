package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
)

// viewer is a VNC client and how it takes the address.
type viewer struct {
	binary string
	args   func(host string, port int) []string
}

// viewers are the VNC clients vnc looks for, in order.
var viewers = []viewer{
	{"remote-viewer", func(h string, p int) []string { return []string{"vnc://" + net.JoinHostPort(h, strconv.Itoa(p))} }},
	{"vncviewer", func(h string, p int) []string { return []string{h + "::" + strconv.Itoa(p)} }},
	{"xtightvncviewer", func(h string, p int) []string { return []string{h + "::" + strconv.Itoa(p)} }},
}

// VNCOptions is `vnc [vm|vmi] NAME`: a local port carrying the instance's VNC display, opened in a
// VNC viewer found on the PATH, or only served (--proxy-only) for any VNC client.
type VNCOptions struct {
	genericiooptions.IOStreams
	clientSource

	Target    target
	ProxyOnly bool
	Port      int
	Address   string
	Output    string
}

func newVNCCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &VNCOptions{IOStreams: streams, clientSource: clientSource{kube: kube}}
	cmd := &cobra.Command{
		Use:     "vnc [vm|vmi] NAME",
		Short:   "Open a virtual machine's display in a VNC viewer (or serve it on a local port)",
		Example: "  virtctl vnc my-vm\n  virtctl vnc my-vm --proxy-only --port 5900   # then point any VNC client at 127.0.0.1:5900",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(cmd, args); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.ProxyOnly, "proxy-only", false, "Only serve the display on a local port (printed), start no viewer")
	f.IntVar(&o.Port, "port", 0, "Local port (0: any free port)")
	f.StringVar(&o.Address, "address", "127.0.0.1", "Local address to listen on")
	f.StringVarP(&o.Output, "output", "o", "", "With --proxy-only: json prints {\"port\": N}")
	return cmd
}

// Complete reads the arguments and checks the flags.
func (o *VNCOptions) Complete(cmd *cobra.Command, args []string) error {
	t, err := targetArgs(cmd, args)
	if err != nil {
		return err
	}
	o.Target = t
	switch {
	case o.Port < 0 || o.Port > 65535:
		return usageError(cmd, "--port must be 0-65535, got %d", o.Port)
	case o.Output != "" && o.Output != "json":
		return usageError(cmd, "--output: only json is supported, got %q", o.Output)
	case o.Output != "" && !o.ProxyOnly:
		return usageError(cmd, "--output goes with --proxy-only")
	}
	return nil
}

// Run serves the display until interrupted (or the viewer exits).
func (o *VNCOptions) Run(ctx context.Context) error {
	c, err := o.connectTo(o.Target)
	if err != nil {
		return err
	}
	var path string
	var v viewer
	if !o.ProxyOnly {
		if path, v, err = findViewer(); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(o.Address, strconv.Itoa(o.Port)))
	if err != nil {
		return fmt.Errorf("listen on %s port %d: %w", o.Address, o.Port, err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	dial := c.streamDialer(o.Target.resource, o.Target.name, subv1.VNC, o.ErrOut)
	if o.ProxyOnly {
		if o.Output == "json" {
			_ = json.NewEncoder(o.Out).Encode(map[string]int{"port": port})
		} else {
			fmt.Fprintf(o.Out, "VNC of %s/%s on %s (any VNC client; Ctrl+C to stop)\n", o.Target.resource, o.Target.name, ln.Addr())
		}
		return serveLocal(ctx, ln, dial, o.ErrOut)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- serveLocal(ctx, ln, dial, o.ErrOut) }()
	cmd := exec.CommandContext(ctx, path, v.args(o.Address, port)...)
	cmd.Stdout, cmd.Stderr = o.Out, o.ErrOut
	runErr := cmd.Run()
	cancel()
	if err := <-served; err != nil {
		return err
	}
	if runErr != nil {
		return fmt.Errorf("the VNC viewer %s: %w", path, runErr)
	}
	return nil
}

// findViewer is the first VNC viewer on the PATH, or an error saying what to install.
func findViewer() (string, viewer, error) {
	for _, v := range viewers {
		if path, err := exec.LookPath(v.binary); err == nil {
			return path, v, nil
		}
	}
	return "", viewer{}, errors.New("no VNC viewer found on the PATH (looked for remote-viewer, vncviewer, xtightvncviewer): " +
		"install one (Debian/Ubuntu: apt install virt-viewer, or tigervnc-viewer; macOS: brew install --cask tigervnc-viewer), " +
		"or run with --proxy-only and point any VNC client at the printed port")
}
