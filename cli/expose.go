package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// ExposeOptions is `expose (vm|vmi|vmirs) NAME --port P`: a Service selecting the launcher Pod(s),
// created whether or not the VM runs yet (it routes once an instance runs). A VM or an instance is
// selected by KubeVirt's vmi.kubevirt.io/id label (its instance has the VM's name), a replica set by
// its own selector; --selector replaces either.
type ExposeOptions struct {
	genericiooptions.IOStreams
	clientSource

	Kind, Name  string
	ServiceName string
	Port        int32
	TargetPort  string
	Type        string
	Protocol    string
	Selector    string
	DryRun      bool
}

func newExposeCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &ExposeOptions{IOStreams: streams, clientSource: clientSource{kube: kube}}
	cmd := &cobra.Command{
		Use:     "expose (vm|vmi|vmirs) NAME --port PORT",
		Short:   "Expose a virtual machine's port as a Service",
		Example: "  virtctl expose vm my-vm --name my-web --port 80\n  virtctl expose vm my-vm --name my-ssh --port 2222 --target-port 22 --type NodePort",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(cmd, args); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.ServiceName, "name", "", "Name of the Service (default: NAME)")
	f.Int32Var(&o.Port, "port", 0, "Port the Service serves on (required)")
	f.StringVar(&o.TargetPort, "target-port", "", "Guest port (number or a port name of the VM's interfaces; default: --port)")
	f.StringVar(&o.Type, "type", string(corev1.ServiceTypeClusterIP), "ClusterIP, NodePort or LoadBalancer")
	f.StringVar(&o.Protocol, "protocol", string(corev1.ProtocolTCP), "TCP, UDP or SCTP")
	f.StringVar(&o.Selector, "selector", "", "Label selector (k=v,…) instead of the VM's own")
	f.BoolVar(&o.DryRun, "dry-run", false, "Validate the Service without creating it")
	return cmd
}

// Complete reads the arguments and checks the flags.
func (o *ExposeOptions) Complete(cmd *cobra.Command, args []string) error {
	o.Kind, o.Name = args[0], args[1]
	if o.ServiceName == "" {
		o.ServiceName = o.Name
	}
	switch {
	case o.Kind != "vm" && o.Kind != "vmi" && o.Kind != "vmirs":
		return usageError(cmd, "the first argument must be vm, vmi or vmirs, got %q", o.Kind)
	case o.Port < 1 || o.Port > 65535:
		return usageError(cmd, "--port is required: a port number 1-65535")
	case o.Type != string(corev1.ServiceTypeClusterIP) && o.Type != string(corev1.ServiceTypeNodePort) && o.Type != string(corev1.ServiceTypeLoadBalancer):
		return usageError(cmd, "--type must be ClusterIP, NodePort or LoadBalancer, got %q", o.Type)
	case o.Protocol != string(corev1.ProtocolTCP) && o.Protocol != string(corev1.ProtocolUDP) && o.Protocol != string(corev1.ProtocolSCTP):
		return usageError(cmd, "--protocol must be TCP, UDP or SCTP, got %q", o.Protocol)
	}
	if o.Selector != "" {
		if _, err := labels.ConvertSelectorToLabelsMap(o.Selector); err != nil {
			return usageError(cmd, "--selector: %v", err)
		}
	}
	return nil
}

// Run reads the object (it must exist), builds the Service and creates it.
func (o *ExposeOptions) Run(ctx context.Context) error {
	c, err := o.connect()
	if err != nil {
		return err
	}
	selector, err := o.selector(ctx, c)
	if err != nil {
		return err
	}
	target := intstr.Parse(o.TargetPort)
	if o.TargetPort == "" {
		target = intstr.FromInt32(o.Port)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: o.ServiceName},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceType(o.Type),
			Selector: selector,
			Ports:    []corev1.ServicePort{{Port: o.Port, TargetPort: target, Protocol: corev1.Protocol(o.Protocol)}},
		},
	}
	var opts []client.CreateOption
	if o.DryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := c.client.Create(ctx, svc, opts...); err != nil {
		return fmt.Errorf("expose %s/%s: %w", o.Kind, o.Name, err)
	}
	fmt.Fprintf(o.Out, "Service %s successfully exposed for %s %s\n", o.ServiceName, o.Kind, o.Name)
	return nil
}

// selector is --selector, or what selects the launcher Pods of the named object.
func (o *ExposeOptions) selector(ctx context.Context, c *clients) (map[string]string, error) {
	if o.Selector != "" {
		return labels.ConvertSelectorToLabelsMap(o.Selector)
	}
	key := client.ObjectKey{Namespace: c.namespace, Name: o.Name}
	switch o.Kind {
	case "vm":
		if err := c.client.Get(ctx, key, &virtv1.VirtualMachine{}); err != nil {
			return nil, err
		}
	case "vmi":
		if err := c.client.Get(ctx, key, &virtv1.VirtualMachineInstance{}); err != nil {
			return nil, err
		}
	case "vmirs":
		rs := &virtv1.VirtualMachineInstanceReplicaSet{}
		if err := c.client.Get(ctx, key, rs); err != nil {
			return nil, err
		}
		if rs.Spec.Selector == nil || len(rs.Spec.Selector.MatchLabels) == 0 || len(rs.Spec.Selector.MatchExpressions) > 0 {
			return nil, fmt.Errorf("vmirs/%s: its selector is not plain matchLabels (%s); give --selector", o.Name, strings.TrimSpace(fmt.Sprint(rs.Spec.Selector)))
		}
		return rs.Spec.Selector.MatchLabels, nil
	}
	return map[string]string{launcherv1.InstanceIDLabel: o.Name}, nil
}
