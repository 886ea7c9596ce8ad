package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"

	"github.com/gorilla/websocket"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/console"
	"github.com/podvirt/podvirt/internal/termsafe"
)

// ConsoleOptions is `console NAME`: the instance's serial console in the terminal (raw mode, left
// with the escape key), or, when stdin is not a terminal, a scriptable stream: stdin to the guest
// (once --after matches, if given), the guest's output to stdout, done at stdin's end or once
// --expect matches.
type ConsoleOptions struct {
	genericiooptions.IOStreams
	clientSource

	Name string
	// Timeout (minutes, as KubeVirt's virtctl) bounds waiting for the instance to run and --expect.
	Timeout int
	Escape  string
	Expect  string
	After   string

	escape byte
	expect *regexp.Regexp
	after  *regexp.Regexp
	c      *clients
}

func newConsoleCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &ConsoleOptions{IOStreams: streams, clientSource: clientSource{kube: kube}}
	cmd := &cobra.Command{
		Use:   "console NAME",
		Short: "Connect to the serial console of a virtual machine instance",
		Example: "  virtctl console my-vm                      # interactive; leave with Ctrl+]\n" +
			"  echo 'uname -a' | virtctl console my-vm --expect 'Linux .*'   # scripted\n" +
			"  echo 'uname -a' | virtctl console my-vm --after 'login: ' --expect 'Linux .*'   # type once the guest asks",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(kube, resourceVMI),
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
	cmd.Flags().IntVar(&o.Timeout, "timeout", 5, "Minutes to wait for the instance to run (and for --after and --expect to match)")
	cmd.Flags().StringVar(&o.Escape, "escape", "^]", "Key that ends an interactive session: ^X for Ctrl+X")
	cmd.Flags().StringVar(&o.Expect, "expect", "", "Scripted use: exit 0 once the guest's output matches this regular expression (exit 124 if it does not in time)")
	cmd.Flags().StringVar(&o.After, "after", "", "Scripted use: send stdin only once the guest's output matches this regular expression, printed after the console connects (a booting guest's prompt; nothing is replayed); --expect then matches what follows (exit 124 if it does not match in time)")
	return cmd
}

// Complete reads the argument.
func (o *ConsoleOptions) Complete(args []string) error {
	o.Name = args[0]
	return nil
}

// Validate checks the flags.
func (o *ConsoleOptions) Validate(cmd *cobra.Command) error {
	if o.Timeout <= 0 || o.Timeout > maxConsoleTimeout {
		return usageError(cmd, "--timeout must be a positive number of minutes up to %d (a year), got %d", maxConsoleTimeout, o.Timeout)
	}
	key, err := parseEscape(o.Escape)
	if err != nil {
		return usageError(cmd, "--escape: %v", err)
	}
	o.escape = key
	if o.Expect != "" {
		if o.expect, err = regexp.Compile(o.Expect); err != nil {
			return usageError(cmd, "--expect: %v", err)
		}
	}
	if o.After != "" {
		if o.after, err = regexp.Compile(o.After); err != nil {
			return usageError(cmd, "--after: %v", err)
		}
	}
	return nil
}

// parseEscape reads ^X (Ctrl+X) or a single character.
func parseEscape(s string) (byte, error) {
	switch {
	case len(s) == 2 && s[0] == '^' && s[1] >= '@' && s[1] <= '_':
		return s[1] - '@', nil
	case len(s) == 1:
		return s[0], nil
	}
	return 0, fmt.Errorf("%q is not ^X or a single character", s)
}

// maxConsoleTimeout bounds --timeout (minutes): a year, and no Duration overflow.
const maxConsoleTimeout = 365 * 24 * 60

// Run waits for the instance to run, then connects the console; a dropped connection is
// reconnected while the instance still runs. --timeout bounds the waits and --expect, never an
// interactive session.
func (o *ConsoleOptions) Run(ctx context.Context) error {
	c, err := o.connect()
	if err != nil {
		return err
	}
	o.c = c
	limit := time.Duration(o.Timeout) * time.Minute
	deadline := time.Now().Add(limit)
	input := readInput(o.In)
	tty := isTerminal(o.In) && isTerminal(o.Out)
	if tty && o.after != nil {
		return fmt.Errorf("--after is for scripted use (stdin or stdout not a terminal); here both are")
	}
	waitingFor := "" // the refusal last reported, so each is printed once
	for {
		waitCtx, cancel := context.WithDeadline(ctx, deadline)
		err := o.waitRunning(waitCtx)
		cancel()
		if err != nil {
			return err
		}
		dialCtx, cancel := context.WithDeadline(ctx, deadline) // bounds the handshake only
		ws, err := console.DialAPI(dialCtx, o.c.config, o.c.subresourcePath(resourceVMI, o.Name, subv1.Console))
		cancel()
		if err != nil {
			if err = o.redialable(err, deadline, &waitingFor); err != nil {
				return err
			}
			if err = pause(ctx, console.RedialInterval); err != nil {
				return err
			}
			continue
		}
		waitingFor = ""
		var s *session
		if tty {
			s, err = o.interactive(ctx, ws, input)
		} else {
			s = &session{ws: ws, out: o.Out, expect: o.expect, after: o.after, queries: &queryStripper{}}
			if o.after != nil {
				s.afterBy = deadline // bounds the wait for --after only: the input then flows unbounded
			}
			sessionCtx, cancel := ctx, context.CancelFunc(func() {})
			if o.expect != nil {
				sessionCtx, cancel = context.WithDeadline(ctx, deadline)
			}
			err = s.run(sessionCtx, input, 0)
			cancel()
			if s.afterSeen {
				o.after = nil // a reconnect (a migration's hand-over) does not wait for it again
			}
		}
		switch {
		case err != nil:
			return err
		case s.userEnded || s.matched:
			return nil
		case s.inputEnded && o.expect == nil:
			return nil
		case o.after != nil && time.Now().After(deadline):
			return timeout(fmt.Errorf("the console of vmi/%s printed nothing matching --after %q within %d minutes; nothing was sent", o.Name, o.After, o.Timeout))
		case o.expect != nil && time.Now().After(deadline):
			return timeout(fmt.Errorf("the console of vmi/%s printed nothing matching --expect %q within %d minutes", o.Name, o.Expect, o.Timeout))
		case ctx.Err() != nil:
			return ctx.Err()
		}
		fmt.Fprintf(o.ErrOut, "\r\nconsole of vmi/%s: %s; reconnecting\r\n", o.Name, s.closeReason)
		if o.expect == nil && o.after == nil {
			deadline = time.Now().Add(limit) // --after and --expect keep their deadline across reconnects
		}
		if err := pause(ctx, console.RedialInterval); err != nil { // a stream that closes at once is not redialled in a tight loop
			return err
		}
	}
}

// redialable returns nil when a refused console is worth dialling again before deadline: the
// stream's far end is moving or restarting (a migration's hand-over, an agent or virt-api restart),
// or the instance changed between the wait and the dial (the next wait tells whether it still
// runs). It says once per reason what it waits for; past the deadline, or for a refusal that will
// not change, it returns the error.
func (o *ConsoleOptions) redialable(err error, deadline time.Time, reported *string) error {
	if !console.Retryable(err) && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("console of vmi/%s: %w", o.Name, err)
	}
	if !time.Now().Before(deadline) {
		return timeout(fmt.Errorf("the console of vmi/%s did not answer within %d minutes: %w", o.Name, o.Timeout, err))
	}
	if msg := err.Error(); msg != *reported {
		fmt.Fprintf(o.ErrOut, "\r\nwaiting for the console of vmi/%s to answer: %s\r\n", o.Name, termsafe.Line(msg))
		*reported = msg
	}
	return nil
}

// pause waits d, or returns ctx's error if it ends first.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// interactive puts the terminal in raw mode for the session and restores it after.
func (o *ConsoleOptions) interactive(ctx context.Context, ws *websocket.Conn, input <-chan []byte) (*session, error) {
	fd := int(o.In.(*os.File).Fd())
	state, err := term.MakeRaw(fd)
	if err != nil {
		_ = ws.Close()
		return nil, fmt.Errorf("put the terminal in raw mode: %w", err)
	}
	defer func() { _ = term.Restore(fd, state) }()
	fmt.Fprintf(o.ErrOut, "Successfully connected to %s console. The escape sequence is %s\r\n", o.Name, o.Escape)
	s := &session{ws: ws, out: o.Out}
	return s, s.run(ctx, input, o.escape)
}

// waitRunning waits, with a progress line, until the instance runs.
func (o *ConsoleOptions) waitRunning(ctx context.Context) error {
	key := client.ObjectKey{Namespace: o.c.namespace, Name: o.Name}
	last := ""
	for {
		vmi := &virtv1.VirtualMachineInstance{}
		err := o.c.client.Get(ctx, key, vmi)
		state := ""
		switch {
		case err == nil && vmi.Status.Phase == virtv1.Running:
			return nil
		case err == nil && vmi.Status.Phase.IsFinal():
			return fmt.Errorf("vmi/%s has ended (%s); start it again first", o.Name, vmi.Status.Phase)
		case err == nil:
			state = "is " + string(vmi.Status.Phase)
		case apierrors.IsNotFound(err):
			state = "does not exist yet"
		case ctx.Err() != nil:
			state = last // the deadline or an interrupt cut the request short
		default:
			return err
		}
		if state != last {
			fmt.Fprintf(o.ErrOut, "waiting for vmi/%s to run: it %s\n", o.Name, state)
			last = state
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return timeout(fmt.Errorf("vmi/%s did not run within %d minutes (it %s)", o.Name, o.Timeout, last))
			}
			return ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// readInput reads in into chunks until its end (the channel then closes). The goroutine ends with
// in; a terminal's read cannot be interrupted, so it is left to the process's exit.
func readInput(in io.Reader) <-chan []byte {
	out := make(chan []byte)
	go func() {
		defer close(out)
		buf := make([]byte, 4096)
		for {
			n, err := in.Read(buf)
			if n > 0 {
				out <- append([]byte(nil), buf[:n]...)
			}
			if err != nil {
				return
			}
		}
	}()
	return out
}

func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
}

// errUserEnded marks the escape key.
var errUserEnded = errors.New("ended by the user")

// noDeadline is the deadline of a close frame written on the way out.
func noDeadline() time.Time { return time.Now().Add(time.Second) }
