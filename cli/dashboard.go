package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/cli/dashboard"
)

// DashboardOptions is `dashboard`: the terminal UI of the namespace's VMs (or all, -A).
type DashboardOptions struct {
	genericiooptions.IOStreams
	clientSource
	AllNamespaces bool
	flagArgs      []string // the kubeconfig flags given, for the console it starts
}

func newDashboardCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &DashboardOptions{IOStreams: streams, clientSource: clientSource{kube: kube}}
	cmd := &cobra.Command{
		Use:     "dashboard",
		Short:   "Watch and drive VMs in an interactive terminal dashboard",
		Example: "  virtctl dashboard\n  virtctl dashboard -A",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.flagArgs = kubeFlagArgs(cmd)
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "VMs of every namespace")
	return cmd
}

// Run shows the dashboard until the user quits; the watches and VNC proxies end with it.
func (o *DashboardOptions) Run(ctx context.Context) error {
	c, err := o.connect()
	if err != nil {
		return err
	}
	ns := c.namespace
	if o.AllNamespaces {
		ns = ""
	}
	// client-go logs watch errors (ERROR level goes to stderr whatever klog's output), which would
	// tear the screen: the header says them instead.
	klog.SetLogger(logr.Discard())
	var p *tea.Program
	src := dashboard.NewSource(c.client, func(msg tea.Msg) { p.Send(msg) })
	actions := newDashboardActions(c, o.flagArgs)
	m := dashboard.New(ns, actions, src, time.Now, os.Getenv("NO_COLOR") != "")
	p = tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(o.In), tea.WithOutput(o.Out))
	_, runErr := p.Run()
	src.Stop()
	actions.close()
	if runErr != nil {
		return fmt.Errorf("dashboard: %w", runErr)
	}
	return nil
}

// dashboardActions are the dashboard's calls, through the same subresources as the commands.
// It owns the VNC proxies it starts, until close; close also cancels the calls under way.
type dashboardActions struct {
	c        *clients
	flagArgs []string
	self     string        // this binary, for the console
	done     chan struct{} // closed by close

	mu     sync.Mutex
	vnc    map[string]string // namespace/name → the proxy's address
	stop   []func()          // end the VNC proxies and wait for them
	closed bool
}

func newDashboardActions(c *clients, flagArgs []string) *dashboardActions {
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	return &dashboardActions{c: c, flagArgs: flagArgs, self: self, done: make(chan struct{}), vnc: map[string]string{}}
}

func (a *dashboardActions) in(ns string) *clients {
	c := *a.c
	c.namespace = ns
	return &c
}

// Do carries out act through the API; the dashboard ending cancels it.
func (a *dashboardActions) Do(ctx context.Context, act dashboard.Action, kind dashboard.Kind, ns, name string) (string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-a.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	c := a.in(ns)
	switch act {
	case dashboard.ActStart:
		return "", c.put(ctx, resourceVM, name, string(actionStart), subv1.StartOptions{})
	case dashboard.ActStop:
		return "", c.put(ctx, resourceVM, name, string(actionStop), subv1.StopOptions{})
	case dashboard.ActForceStop:
		return "", c.put(ctx, resourceVM, name, string(actionStop), subv1.StopOptions{GracePeriod: ptr.To[int64](0)})
	case dashboard.ActRestart:
		return "", c.put(ctx, resourceVM, name, string(actionRestart), subv1.RestartOptions{})
	case dashboard.ActPause:
		return "", c.put(ctx, resourceVMI, name, subv1.Pause, subv1.PauseOptions{})
	case dashboard.ActUnpause:
		return "", c.put(ctx, resourceVMI, name, subv1.Unpause, subv1.UnpauseOptions{})
	case dashboard.ActMigrate:
		if kind == dashboard.KindVM {
			return "", c.put(ctx, resourceVM, name, subv1.Migrate, subv1.MigrateOptions{})
		}
		mig := &virtv1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: name + "-migration-"},
			Spec: virtv1.VirtualMachineInstanceMigrationSpec{VMIName: name}}
		return "", c.client.Create(ctx, mig)
	case dashboard.ActDelete:
		return "", c.client.Delete(ctx, objectOf(kind, ns, name))
	case dashboard.ActVNC:
		return a.serveVNC(c, name)
	}
	return "", fmt.Errorf("unknown action %q", act)
}

// objectOf is the object of kind ns/name, for a delete.
func objectOf(kind dashboard.Kind, ns, name string) client.Object {
	meta := metav1.ObjectMeta{Namespace: ns, Name: name}
	switch kind {
	case dashboard.KindVMI:
		return &virtv1.VirtualMachineInstance{ObjectMeta: meta}
	case dashboard.KindVMIRS:
		return &virtv1.VirtualMachineInstanceReplicaSet{ObjectMeta: meta}
	default:
		return &virtv1.VirtualMachine{ObjectMeta: meta}
	}
}

// serveVNC serves the instance's display on a free loopback port until the dashboard ends (once
// per instance: asked again, it says where).
func (a *dashboardActions) serveVNC(c *clients, name string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return "", errors.New("the dashboard is ending")
	}
	key := c.namespace + "/" + name
	if addr, ok := a.vnc[key]; ok {
		return fmt.Sprintf("VNC of %s already on %s", key, addr), nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listen for VNC: %w", err)
	}
	dial := c.streamDialer(resourceVMI, name, subv1.VNC, io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = serveLocal(ctx, ln, dial, io.Discard) }()
	a.vnc[key] = ln.Addr().String()
	a.stop = append(a.stop, func() { cancel(); <-done })
	return fmt.Sprintf("VNC of %s on %s (any VNC client; open until you quit)", key, ln.Addr()), nil
}

// close cancels the calls under way, ends the VNC proxies and refuses new ones.
func (a *dashboardActions) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	close(a.done)
	for _, stop := range a.stop {
		stop()
	}
	a.stop, a.vnc, a.closed = nil, nil, true
}

// Exec runs line with sh -c in the guest of ns/name.
func (a *dashboardActions) Exec(ctx context.Context, ns, name, line string) (dashboard.ExecOutcome, error) {
	res, err := a.in(ns).exec(ctx, name, &subv1.ExecRequest{Command: []string{"sh", "-c", line}, TimeoutSeconds: int64(dashboard.ExecTimeout / time.Second)})
	if err != nil {
		return dashboard.ExecOutcome{}, err
	}
	return dashboard.ExecOutcome{Output: string(res.Stdout) + string(res.Stderr), ExitCode: res.ExitCode,
		Truncated: res.StdoutTruncated || res.StderrTruncated}, nil
}

// Console runs this binary's console command with the same kubeconfig flags.
func (a *dashboardActions) Console(ns, name string) *exec.Cmd {
	return exec.Command(a.self, append(append([]string{"console", name}, a.flagArgs...), "-n", ns)...)
}
