package apiserver

import (
	"context"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
	"github.com/podvirt/podvirt/internal/atomicfile"
)

// CertFiles mirrors the certificate the rotator keeps in a Secret into files in Dir (tls.crt,
// tls.key and, when present, the ca.crt that signed it; never the CA's key), where the server reads
// and reloads it. Reading the Secret directly spares the
// kubelet's periodic volume refresh (up to a minute or more) at every start and rotation.
type CertFiles struct {
	Client client.Client
	Secret types.NamespacedName
	Dir    string
}

// SetupWithManager watches the one Secret.
func (c *CertFiles) SetupWithManager(mgr ctrl.Manager) error {
	only := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == c.Secret.Namespace && o.GetName() == c.Secret.Name
	})
	return ctrl.NewControllerManagedBy(mgr).Named("cert-files-"+c.Secret.Name).
		For(&corev1.Secret{}, builder.WithPredicates(only)).Complete(c)
}

// Reconcile writes the files when the Secret holds a certificate that differs from them.
func (c *CertFiles) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	s := &corev1.Secret{}
	if err := c.Client.Get(ctx, c.Secret, s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	crt, key := s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
	if len(crt) == 0 || len(key) == 0 {
		return ctrl.Result{}, nil // the rotator has not filled it yet
	}
	// CA and key first, then the certificate: the server reloads when the certificate changes.
	type file struct {
		name string
		data []byte
	}
	var files []file
	if ca := s.Data[agentv1.CACertKey]; len(ca) > 0 {
		files = append(files, file{agentv1.CACertKey, ca})
	}
	files = append(files, file{corev1.TLSPrivateKeyKey, key}, file{corev1.TLSCertKey, crt})
	for _, f := range files {
		if err := writeIfChanged(filepath.Join(c.Dir, f.name), f.data); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// writeIfChanged replaces path atomically unless it already holds data.
func writeIfChanged(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return nil
	}
	return atomicfile.WriteFile(path, data, 0o600)
}
