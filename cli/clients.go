package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/gorilla/websocket"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	"github.com/podvirt/podvirt/console"
	"github.com/podvirt/podvirt/internal/scheme"
	"github.com/podvirt/podvirt/internal/termsafe"
)

// Resource names in subresource paths.
const (
	resourceVM  = subv1.VirtualMachines
	resourceVMI = subv1.VirtualMachineInstances
)

// clients is what a command reaches the cluster with, from the kubeconfig flags.
type clients struct {
	namespace string
	config    *rest.Config
	// client reads and watches kubevirt.io objects.
	client client.WithWatch
	// rest calls subresources.kubevirt.io by path.
	rest rest.Interface
	// kube reads Pod logs.
	kube kubernetes.Interface
}

func newClients(kube *genericclioptions.ConfigFlags) (*clients, error) {
	cfg, err := kube.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if cfg.QPS == 0 { // client-go's default (5/s) would throttle a wait's polling; kubectl allows 50/s
		cfg.QPS, cfg.Burst = 50, 100
	}
	ns, _, err := kube.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig namespace: %w", err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	return &clients{namespace: ns, config: cfg, client: c, rest: cs.Discovery().RESTClient(), kube: cs}, nil
}

// clientSource is how a command reaches the cluster: the kubeconfig flags, and the factory that makes
// its clients (the kubeconfig's, unless a test gave the command fake ones). Commands take their
// clients from it in Run, after their flags are validated.
type clientSource struct {
	kube    *genericclioptions.ConfigFlags
	factory func() (*clients, error)
}

// connect makes the command's clients.
func (s *clientSource) connect() (*clients, error) {
	if s.factory == nil {
		s.factory = func() (*clients, error) { return newClients(s.kube) }
	}
	return s.factory()
}

// connectTo is connect in the target's namespace when it names one (vm/NAME.NAMESPACE).
func (s *clientSource) connectTo(t target) (*clients, error) {
	c, err := s.connect()
	if err == nil && t.namespace != "" {
		c.namespace = t.namespace
	}
	return c, err
}

// kubeFlagArgs are the kubeconfig flags the user set on cmd (--server, --token, --as, --context …),
// as arguments for another run of this binary (the dashboard's console, ssh's ProxyCommand), so
// it reaches the same cluster as the same user.
func kubeFlagArgs(cmd *cobra.Command) []string {
	var args []string
	cmd.InheritedFlags().Visit(func(f *pflag.Flag) {
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				args = append(args, "--"+f.Name+"="+v)
			}
			return
		}
		args = append(args, "--"+f.Name+"="+f.Value.String())
	})
	return args
}

// dryRun is the dryRun field of a subresource body for --dry-run.
func dryRun(on bool) []string {
	if on {
		return []string{metav1.DryRunAll}
	}
	return nil
}

// subresourcePath is the path of name's subresource sub (resource: virtualmachines or
// virtualmachineinstances) in the clients' namespace.
func (c *clients) subresourcePath(resource, name, sub string) string {
	return "/apis/" + subv1.GroupName + "/v1/namespaces/" + c.namespace + "/" + resource + "/" + name + "/" + sub
}

// put calls a subresource with body (JSON); the server's refusal comes back as its Status error.
func (c *clients) put(ctx context.Context, resource, name, sub string, body any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode the %s request: %w", sub, err)
	}
	return c.rest.Put().AbsPath(c.subresourcePath(resource, name, sub)).Body(raw).Do(ctx).Error()
}

// handOverWait bounds how long a stream (a VNC or port-forward connection) is dialled again while
// its far end is moving or restarting: a migration's hand-over takes seconds, an agent's restart
// tens of seconds.
const handOverWait = time.Minute

// streamDialer dials name's stream sub (vnc, portforward/PORT) for every local connection, riding
// out a hand-over for up to handOverWait and saying on errOut what it waits for.
func (c *clients) streamDialer(resource, name, sub string, errOut io.Writer) func(context.Context) (*websocket.Conn, error) {
	path := c.subresourcePath(resource, name, sub)
	return func(ctx context.Context) (*websocket.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, handOverWait)
		defer cancel()
		return console.DialAPIRetrying(ctx, c.config, path, func(err error) {
			fmt.Fprintf(errOut, "waiting for the %s of %s/%s to answer: %s\n", sub, resource, name, termsafe.Line(err.Error()))
		})
	}
}
