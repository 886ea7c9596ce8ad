package apiserver

import (
	"bytes"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
)

// NodeCerts hands the node agents the node CA's certificate: it copies ca.crt from the rotator's
// Secret (which also holds the CA's private key and virt-api's client key pair, for virt-api only)
// into the Secret the agents may read. Each agent's own certificate comes from NodeSigner. Both
// Secrets exist beforehand (install/virt-api).
type NodeCerts struct {
	Client client.Client
	// From is the rotator's Secret, To the agents'.
	From, To types.NamespacedName
	// Serving is virt-api's serving certificate's Secret: its CA goes to the agents too
	// (agentv1.VirtAPICAKey), for their launchers; zero: not copied.
	Serving types.NamespacedName
}

// SetupWithManager watches both Secrets (a tampered or emptied copy is restored).
func (n *NodeCerts) SetupWithManager(mgr ctrl.Manager) error {
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		k := client.ObjectKeyFromObject(o)
		return k == n.From || k == n.To || k == n.Serving
	})
	return ctrl.NewControllerManagedBy(mgr).Named("node-agent-certs").
		For(&corev1.Secret{}, builder.WithPredicates(ours)).Complete(n)
}

// Reconcile updates the agents' Secret when it differs from the rotator's certificate.
func (n *NodeCerts) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	from, to := &corev1.Secret{}, &corev1.Secret{}
	if err := n.Client.Get(ctx, n.From, from); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if len(from.Data[agentv1.CACertKey]) == 0 {
		return ctrl.Result{}, nil // not generated yet
	}
	if err := n.Client.Get(ctx, n.To, to); err != nil {
		return ctrl.Result{}, fmt.Errorf("node agents' certificate secret %s: %w", n.To, err)
	}
	want := map[string][]byte{agentv1.CACertKey: from.Data[agentv1.CACertKey]}
	if n.Serving.Name != "" {
		serving := &corev1.Secret{}
		if err := n.Client.Get(ctx, n.Serving, serving); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("virt-api's serving certificate secret %s: %w", n.Serving, err)
		}
		if ca := serving.Data[agentv1.CACertKey]; len(ca) > 0 {
			want[agentv1.VirtAPICAKey] = ca
		}
	}
	if sameData(to.Data, want) {
		return ctrl.Result{}, nil
	}
	to.Data = want
	if err := n.Client.Update(ctx, to); err != nil {
		return ctrl.Result{}, fmt.Errorf("update node agents' certificate secret %s: %w", n.To, err)
	}
	return ctrl.Result{}, nil
}

func sameData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if !bytes.Equal(a[k], v) {
			return false
		}
	}
	return true
}
