package apiserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
)

// NodeSigner is the signer of the node agents' certificates (agentv1.SignerName). A CSR of that
// signer is approved and signed when the requester is the agent ServiceAccount's Pod-bound token and
// the request names exactly that token's node (agentv1.NodeIdentity), with nothing else in it; any
// other is denied, saying why. It signs with the node CA that the rotator keeps in CA (ca.crt,
// ca.key), which only virt-api reads.
type NodeSigner struct {
	Client client.Client
	// CA is the Secret of the node CA.
	CA types.NamespacedName
	// Requester is the agents' user name (serviceaccount.MakeUsername of their ServiceAccount).
	Requester string
	Clock     clock.PassiveClock
}

// SetupWithManager watches the CSRs of the agents' signer.
func (s *NodeSigner) SetupWithManager(mgr ctrl.Manager) error {
	if s.Clock == nil {
		s.Clock = clock.RealClock{}
	}
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		csr, ok := o.(*certificatesv1.CertificateSigningRequest)
		return ok && csr.Spec.SignerName == agentv1.SignerName
	})
	return ctrl.NewControllerManagedBy(mgr).Named("node-agent-signer").
		For(&certificatesv1.CertificateSigningRequest{}, builder.WithPredicates(ours)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).Complete(s)
}

// SignerCache is how the manager must cache CSRs for the signer: only its own signer's (root on any
// node can create large CSRs of other signers with the kubelet's credentials), without managed fields.
func SignerCache() cache.ByObject {
	return cache.ByObject{
		Field:     fields.OneTermEqualSelector("spec.signerName", agentv1.SignerName),
		Transform: cache.TransformStripManagedFields(),
	}
}

// maxRequest bounds a CSR's PEM request: an agent's (ECDSA P-256, one name) is about 400 bytes.
const maxRequest = 4 << 10

// maxPending is how old a CSR may be when it is signed: an agent waits two minutes for its
// certificate, and a stale request (of a node removed since, or from before a CA rotation) is not
// signed.
const maxPending = 10 * time.Minute

// RequesterOf is the user name of namespace's agents.
func RequesterOf(namespace string) string {
	return serviceaccount.MakeUsername(namespace, agentv1.ServiceAccount)
}

// signerAction is what one pass does to a CSR.
type signerAction int

const (
	signerNone signerAction = iota
	signerDeny
	signerApprove
	signerSign
	// signerFail: approved by someone else, but not a request the signer signs.
	signerFail
)

// Reason of the conditions the signer sets.
const (
	reasonApproved = "PodvirtNodeAgent"
	reasonDenied   = "NotThisNodesAgent"
	reasonFailed   = "NotSignedForThisNodesAgent"
)

// decideCSR is the signer's decision for csr at now: deny (with why), approve, sign, or nothing
// (already issued, denied or failed, or another signer's).
func decideCSR(csr *certificatesv1.CertificateSigningRequest, requester string, now time.Time) (signerAction, string) {
	if csr.Spec.SignerName != agentv1.SignerName || len(csr.Status.Certificate) > 0 {
		return signerNone, ""
	}
	approved := false
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			return signerNone, ""
		case certificatesv1.CertificateApproved:
			approved = true
		}
	}
	_, _, err := reviewCSR(csr, requester)
	if err == nil && now.Sub(csr.CreationTimestamp.Time) > maxPending {
		err = fmt.Errorf("metadata.creationTimestamp: pending for more than %s; the agent asks again", maxPending)
	}
	if err != nil {
		if approved { // approved by someone else: still not signed, and the requester is told
			return signerFail, err.Error()
		}
		return signerDeny, err.Error()
	}
	if !approved {
		return signerApprove, ""
	}
	return signerSign, ""
}

// reviewCSR checks that csr is the agent of one node asking for that node's certificate, and returns
// the parsed request and the node.
func reviewCSR(csr *certificatesv1.CertificateSigningRequest, requester string) (*x509.CertificateRequest, string, error) {
	if csr.Spec.Username != requester {
		return nil, "", fmt.Errorf("spec.username: %q is not the node agents' ServiceAccount %q", csr.Spec.Username, requester)
	}
	nodes := csr.Spec.Extra[agentv1.NodeNameExtra]
	if len(nodes) != 1 || nodes[0] == "" {
		return nil, "", fmt.Errorf("spec.extra[%s]: the requester's token names %d nodes, want one (a token bound to the agent's Pod)", agentv1.NodeNameExtra, len(nodes))
	}
	node := nodes[0]
	if len(csr.Spec.Request) > maxRequest {
		return nil, "", fmt.Errorf("spec.request: %d bytes, more than the %d an agent's request needs", len(csr.Spec.Request), maxRequest)
	}
	block, rest := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" || len(rest) > 0 {
		return nil, "", errors.New("spec.request: not one PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, "", fmt.Errorf("spec.request: %w", err)
	}
	// The cheap checks first: the signature's is the only costly one.
	if want := agentv1.NodeIdentity(node); req.Subject.CommonName != want || len(req.Subject.Names) != 1 {
		return nil, "", fmt.Errorf("spec.request: subject %.100q: must be exactly CN=%s, the requester's node", req.Subject.String(), want)
	}
	if len(req.DNSNames)+len(req.IPAddresses)+len(req.EmailAddresses)+len(req.URIs) > 0 {
		return nil, "", errors.New("spec.request: subject alternative names are not signed (an agent is named by its common name only)")
	}
	if k, ok := req.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		return nil, "", fmt.Errorf("spec.request: public key: %T: only ECDSA P-256 keys are signed (the agents' own)", req.PublicKey)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, "", fmt.Errorf("spec.request: signature: %w", err)
	}
	for _, u := range csr.Spec.Usages {
		if !slices.Contains(agentv1.CertificateUsages, u) {
			return nil, "", fmt.Errorf("spec.usages: %q is not signed (only %v)", u, agentv1.CertificateUsages)
		}
	}
	for _, u := range agentv1.CertificateUsages {
		if !slices.Contains(csr.Spec.Usages, u) {
			return nil, "", fmt.Errorf("spec.usages: %q is missing", u)
		}
	}
	return req, node, nil
}

// Reconcile takes one action on a CSR of the agents' signer.
func (s *NodeSigner) Reconcile(ctx context.Context, r ctrl.Request) (ctrl.Result, error) {
	csr := &certificatesv1.CertificateSigningRequest{}
	if err := s.Client.Get(ctx, r.NamespacedName, csr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	action, why := decideCSR(csr, s.Requester, s.Clock.Now())
	now := metav1.NewTime(s.Clock.Now())
	switch action {
	case signerDeny, signerApprove:
		c := certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: reasonApproved,
			Message: "the node agent of the node its token is bound to", LastUpdateTime: now, LastTransitionTime: now,
		}
		if action == signerDeny {
			c.Type, c.Reason, c.Message = certificatesv1.CertificateDenied, reasonDenied, why
			log.FromContext(ctx).Info("Denied a node agent certificate request", "csr", csr.Name, "requester", csr.Spec.Username, "why", why)
		}
		csr.Status.Conditions = append(csr.Status.Conditions, c)
		if err := s.Client.SubResource("approval").Update(ctx, csr); err != nil {
			return ctrl.Result{}, fmt.Errorf("csr %s: approval: %w", csr.Name, err)
		}
	case signerFail:
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue, Reason: reasonFailed, Message: why, LastUpdateTime: now, LastTransitionTime: now,
		})
		if err := s.Client.Status().Update(ctx, csr); err != nil {
			return ctrl.Result{}, fmt.Errorf("csr %s: mark failed: %w", csr.Name, err)
		}
	case signerSign:
		der, err := s.sign(ctx, csr)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("csr %s: %w", csr.Name, err)
		}
		csr.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		if err := s.Client.Status().Update(ctx, csr); err != nil {
			return ctrl.Result{}, fmt.Errorf("csr %s: write the certificate: %w", csr.Name, err)
		}
	}
	return ctrl.Result{}, nil
}

// sign issues the certificate csr asks for, valid from five minutes ago (clock skew) for
// agentv1.CertificateLifetime, or the shorter spec.expirationSeconds (at least ten minutes), and
// never beyond the CA.
func (s *NodeSigner) sign(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) ([]byte, error) {
	req, node, err := reviewCSR(csr, s.Requester)
	if err != nil {
		return nil, err
	}
	sec := &corev1.Secret{}
	if err := s.Client.Get(ctx, s.CA, sec); err != nil {
		return nil, fmt.Errorf("node CA: %w", err)
	}
	ca, err := tls.X509KeyPair(sec.Data[agentv1.CACertKey], sec.Data[caKeyKey])
	if err != nil {
		return nil, fmt.Errorf("node CA in secret %s: %w", s.CA, err)
	}
	now := s.Clock.Now()
	life := agentv1.CertificateLifetime
	if e := csr.Spec.ExpirationSeconds; e != nil {
		life = min(life, max(time.Duration(*e)*time.Second, 10*time.Minute))
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(life)
	if notAfter.After(ca.Leaf.NotAfter) {
		notAfter = ca.Leaf.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: agentv1.NodeIdentity(node)},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		// No SANs: agents are named by their common name only (agentv1.ClientConfig).
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Leaf, req.PublicKey, ca.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	return der, nil
}

// caKeyKey is the CA's private key in the rotator's Secret (cert-controller's name).
const caKeyKey = "ca.key"
