package admission

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
)

// Clients the webhook port accepts. Every Pod can reach it and the eviction webhook has a side
// effect (it marks instances for evacuation), so with caller names configured only the
// kube-apiserver gets an answer: it presents a client certificate of the cluster's client CA
// (kube-system/extension-apiserver-authentication's client-ca-file) with one of these names as its
// common name, configured with the apiserver's --admission-control-config-file (a
// WebhookAdmissionConfiguration's kubeConfigFile: see internal/localcluster). Anyone else's TLS
// handshake fails before a request is read.

// ClientCAs is the CA bundle client certificates are verified against (k8s.io/apiserver's
// dynamiccertificates.ConfigMapCAController follows the cluster's).
type ClientCAs interface {
	VerifyOptions() (x509.VerifyOptions, bool)
}

// RequireCallers returns the webhook server's TLS option that admits only client certificates of
// cas whose common name is one of names.
func RequireCallers(cas ClientCAs, names []string) func(*tls.Config) {
	return func(c *tls.Config) {
		c.ClientAuth = tls.RequireAnyClientCert
		c.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			return verifyCaller(cas, names, raw)
		}
	}
}

// errNoClientCA refuses every caller until the cluster's client CA is known.
var errNoClientCA = errors.New("webhook callers: the cluster's client CA is not loaded yet")

func verifyCaller(cas ClientCAs, names []string, raw [][]byte) error {
	if len(raw) == 0 {
		return errors.New("webhook callers: no client certificate")
	}
	opts, ok := cas.VerifyOptions()
	if !ok {
		return errNoClientCA
	}
	leaf, err := x509.ParseCertificate(raw[0])
	if err != nil {
		return fmt.Errorf("webhook callers: client certificate: %w", err)
	}
	opts.Intermediates = x509.NewCertPool()
	for _, der := range raw[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return fmt.Errorf("webhook callers: intermediate certificate: %w", err)
		}
		opts.Intermediates.AddCert(c)
	}
	opts.KeyUsages = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if _, err := leaf.Verify(opts); err != nil {
		return fmt.Errorf("webhook callers: %w", err)
	}
	if !slices.Contains(names, leaf.Subject.CommonName) {
		return fmt.Errorf("webhook callers: %q is not an allowed caller (--webhook-client-names)", leaf.Subject.CommonName)
	}
	return nil
}
