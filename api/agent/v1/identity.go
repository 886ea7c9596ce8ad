package v1

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
)

// Identities. Every node agent holds a certificate of its own, naming its node, and virt-api a client
// certificate naming itself; all are signed by the node CA that virt-api keeps (the Secret
// virt-handler-ca, whose key only virt-api reads). An agent serves subresources only to virt-api's
// identity and a migration stream only to the agent of the instance's source node; virt-api and a
// migration's source accept an agent only under the name of the node they meant to reach. So root on
// one node, which holds that node's key, can act only as that node's agent.

// SignerName is the CertificateSigningRequest signer of the agents' certificates: an agent asks for
// its certificate with a CSR of this signer, and virt-api approves and signs it when the requester
// is the agent ServiceAccount's token bound to a Pod on the node the certificate names.
const SignerName = "podvirt.io/node-agent"

// ServiceAccount is the node agents' ServiceAccount (in Podvirt's namespace): the only requester
// whose CSRs are signed.
const ServiceAccount = "virt-handler"

// NodeNameExtra is the user-info extra the kube-apiserver sets from a Pod-bound ServiceAccount token:
// the node the Pod runs on. It is the only proof of which node a request comes from.
const NodeNameExtra = "authentication.kubernetes.io/node-name"

// CertificateLifetime is how long an agent's certificate is valid; the agent asks for a new one after
// two thirds of it.
const CertificateLifetime = 24 * time.Hour

// CertificateUsages are the usages an agent's CSR must ask for, no more (it serves, and it is a
// client of the other agents during migrations).
var CertificateUsages = []certificatesv1.KeyUsage{
	certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth, certificatesv1.UsageClientAuth,
}

// nodePrefix starts every node agent's identity; no other identity has it.
const nodePrefix = "podvirt:node:"

// NodeIdentity is the common name in the certificate of the agent of node.
func NodeIdentity(node string) string { return nodePrefix + node }

// NodeOf is the node of an agent's identity, or false when it names no node.
func NodeOf(identity string) (string, bool) {
	node, ok := strings.CutPrefix(identity, nodePrefix)
	return node, ok && node != ""
}

// VirtAPIIdentity is the common name (and DNS name, the rotator's only way to set it) of virt-api's
// client certificate towards the agents of namespace's installation.
func VirtAPIIdentity(namespace string) string { return "virt-api-client." + namespace + ".podvirt" }

// Caller is the identity of a verified mutual-TLS peer: the common name of its certificate, or ""
// when the connection carries none.
func Caller(state *tls.ConnectionState) string {
	if state == nil || len(state.VerifiedChains) == 0 || len(state.VerifiedChains[0]) == 0 {
		return ""
	}
	return state.VerifiedChains[0][0].Subject.CommonName
}

// ClientConfig is the client side of a call to the agent of node: it presents cert and accepts
// only a certificate of roots naming NodeIdentity(node), whatever address it was reached at.
func ClientConfig(cert *tls.Certificate, roots *x509.CertPool, node string) *tls.Config {
	want := NodeIdentity(node)
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{*cert},
		// Agents are reached by node IP, which their certificates do not name: the chain and the
		// name are checked by VerifyConnection instead.
		InsecureSkipVerify: true, //nolint:gosec // verified below
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyPeer(cs, roots, want)
		},
	}
}

// verifyPeer checks that cs's certificate chains to roots for server auth and names want.
func verifyPeer(cs tls.ConnectionState, roots *x509.CertPool, want string) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the node agent presented no certificate")
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return fmt.Errorf("node agent certificate: %w", err)
	}
	if got := leaf.Subject.CommonName; got != want {
		return fmt.Errorf("node agent certificate names %q, not %q", got, want)
	}
	return nil
}
