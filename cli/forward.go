package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/gorilla/websocket"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	"github.com/podvirt/podvirt/console"
	"github.com/podvirt/podvirt/internal/splice"
)

// target is a VM or an instance named on the command line: vm/NAME, vmi/NAME (KubeVirt's
// TYPE/NAME[.NAMESPACE]); a bare NAME is an instance.
type target struct {
	resource, name, namespace string
}

func parseTarget(s string) (target, error) {
	kind, name, found := strings.Cut(s, "/")
	if !found {
		kind, name = "vmi", s
	}
	var t target
	switch kind {
	case "vm", "vms", "virtualmachine", "virtualmachines":
		t.resource = resourceVM
	case "vmi", "vmis", "virtualmachineinstance", "virtualmachineinstances":
		t.resource = resourceVMI
	default:
		return t, fmt.Errorf("%q: the type must be vm or vmi (vm/NAME, vmi/NAME)", s)
	}
	t.name, t.namespace, _ = strings.Cut(name, ".")
	if t.name == "" {
		return t, fmt.Errorf("%q: no name", s)
	}
	return t, nil
}

// targetArgs reads "[vm|vmi] NAME" (or TYPE/NAME) arguments.
func targetArgs(cmd *cobra.Command, args []string) (target, error) {
	name := args[len(args)-1]
	if len(args) == 2 {
		name = args[0] + "/" + args[1]
	}
	t, err := parseTarget(name)
	if err != nil {
		return t, usageError(cmd, "%v", err)
	}
	return t, nil
}

// portPair is [LOCAL:]REMOTE of port-forward (LOCAL 0: any free port).
type portPair struct{ local, remote int }

func parsePortPair(s string) (portPair, error) {
	localS, remoteS, found := strings.Cut(s, ":")
	if !found {
		localS, remoteS = s, s
	}
	local, lerr := strconv.Atoi(localS)
	remote, rerr := strconv.Atoi(remoteS)
	switch {
	case lerr != nil || local < 0 || local > 65535:
		return portPair{}, fmt.Errorf("%q: the local port must be a number 0-65535", s)
	case rerr != nil || remote < 1 || remote > 65535:
		return portPair{}, fmt.Errorf("%q: the remote port must be a number 1-65535", s)
	}
	return portPair{local, remote}, nil
}

// PortForwardOptions is `port-forward TYPE/NAME [LOCAL:]REMOTE…`: local ports (or, with --stdio,
// stdin/stdout) carried to the guest's ports over websockets through the API.
type PortForwardOptions struct {
	genericiooptions.IOStreams
	clientSource

	Target  target
	Ports   []portPair
	Address string
	Stdio   bool

	c *clients
}

func newPortForwardCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &PortForwardOptions{IOStreams: streams, clientSource: clientSource{kube: kube}}
	cmd := &cobra.Command{
		Use:   "port-forward TYPE/NAME[.NAMESPACE] [LOCAL:]REMOTE...",
		Short: "Forward local ports to a virtual machine's ports (any guest TCP port)",
		Example: "  virtctl port-forward vm/my-vm 8080:80\n" +
			"  ssh -o ProxyCommand='virtctl port-forward --stdio vm/my-vm 22' user@my-vm",
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(cmd, args); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&o.Address, "address", "127.0.0.1", "Local address to listen on")
	cmd.Flags().BoolVar(&o.Stdio, "stdio", false, "Carry stdin and stdout to the one remote port instead of listening (for ssh's ProxyCommand)")
	return cmd
}

// Complete parses and checks the arguments.
func (o *PortForwardOptions) Complete(cmd *cobra.Command, args []string) error {
	t, err := parseTarget(args[0])
	if err != nil {
		return usageError(cmd, "%v", err)
	}
	o.Target = t
	for _, a := range args[1:] {
		p, err := parsePortPair(a)
		if err != nil {
			return usageError(cmd, "%v", err)
		}
		o.Ports = append(o.Ports, p)
	}
	if o.Stdio && len(o.Ports) != 1 {
		return usageError(cmd, "--stdio carries exactly one port, got %d", len(o.Ports))
	}
	return nil
}

// Run listens (or pipes stdio) until interrupted.
func (o *PortForwardOptions) Run(ctx context.Context) error {
	c, err := o.connectTo(o.Target)
	if err != nil {
		return err
	}
	o.c = c
	dial := func(remote int) func(context.Context) (*websocket.Conn, error) {
		return c.streamDialer(o.Target.resource, o.Target.name, subv1.PortForward+"/"+strconv.Itoa(remote), o.ErrOut)
	}
	if o.Stdio {
		ws, err := dial(o.Ports[0].remote)(ctx)
		if err != nil {
			return fmt.Errorf("port-forward to %s/%s port %d: %w", o.Target.resource, o.Target.name, o.Ports[0].remote, err)
		}
		splice.Join(ctx, newStdio(o.In, o.Out), console.NewConn(ws), nil) // until the guest closes the connection
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(o.Ports))
	for _, p := range o.Ports {
		ln, err := net.Listen("tcp", net.JoinHostPort(o.Address, strconv.Itoa(p.local)))
		if err != nil {
			return fmt.Errorf("listen on %s port %d: %w", o.Address, p.local, err)
		}
		fmt.Fprintf(o.Out, "Forwarding from %s -> %d\n", ln.Addr(), p.remote)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- serveLocal(ctx, ln, dial(p.remote), o.ErrOut)
		}()
	}
	wg.Wait()
	close(errs)
	return errors.Join(collect(errs)...)
}

func collect(errs <-chan error) []error {
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}

// serveLocal accepts connections on ln until ctx ends and carries each over a new websocket from
// dial; every connection's goroutines are joined before it returns.
func serveLocal(ctx context.Context, ln net.Listener, dial func(context.Context) (*websocket.Conn, error), errOut io.Writer) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept on %s: %w", ln.Addr(), err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws, err := dial(ctx)
			if err != nil {
				fmt.Fprintf(errOut, "connection from %s: %v\n", conn.RemoteAddr(), err)
				_ = conn.Close()
				return
			}
			// The local side is the client: its half-close is dropped (a websocket cannot carry
			// one), so the guest's answer still comes back.
			splice.Join(ctx, conn, console.NewConn(ws), nil)
		}()
	}
}

// stdio is the client side of `port-forward --stdio`: stdin and stdout as one stream. A read of
// stdin cannot be interrupted, so it runs in its own goroutine feeding a pipe, which Close does
// interrupt; that goroutine alone outlives the stream, blocked on stdin until the process exits.
type stdio struct {
	in  *io.PipeReader
	out io.Writer
}

func newStdio(in io.Reader, out io.Writer) stdio {
	r, w := io.Pipe()
	go func() { _, err := io.Copy(w, in); _ = w.CloseWithError(err) }()
	return stdio{in: r, out: out}
}

func (s stdio) Read(p []byte) (int, error)  { return s.in.Read(p) }
func (s stdio) Write(p []byte) (int, error) { return s.out.Write(p) }
func (s stdio) Close() error                { return s.in.Close() }

// CloseWrite makes stdin's end a half-close (the request is complete, the answer still comes
// back). Stdout is not the command's to close: a half-close of it does nothing (a websocket never
// sends one).
func (s stdio) CloseWrite() error { return nil }
