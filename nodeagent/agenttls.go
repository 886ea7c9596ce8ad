package nodeagent

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
	"net"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
)

// AgentTLS is the agent's side of the agents' mutual TLS: a certificate of its own, naming its node
// (agentv1.NodeIdentity), that it asks virt-api for with a CSR of agentv1.SignerName and renews
// after two thirds of its life, and the node CA that virt-api copies into a Secret (ca.crt only),
// read again every Refresh. Its key never leaves the process: a restarted agent asks again.
type AgentTLS struct {
	// Reader reads the CA Secret (uncached: the agent may read only this one Secret).
	Reader client.Reader
	Secret types.NamespacedName
	// CSRs creates and watches the agent's certificate signing requests.
	CSRs     kubernetes.Interface
	NodeName string
	// Refresh is how often the CA is read again and the certificate checked.
	Refresh time.Duration
	Clock   clock.Clock
	// VirtAPIService is virt-api's Service (in Secret's namespace): launchers ask its cluster IP for
	// their node's kubelet lease (NodeCheck).
	VirtAPIService string

	mu        sync.RWMutex
	cert      *tls.Certificate
	roots     *x509.CertPool
	virtAPICA []byte
	virtAPI   string // https://CLUSTER-IP:PORT
}

// NodeCheck is what launchers need to ask virt-api for their node's kubelet lease while the agent
// is away (launcherv1.NodeCheck): nil until the Secret holds virt-api's CA.
func (a *AgentTLS) NodeCheck() *launcherv1.NodeCheck {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if len(a.virtAPICA) == 0 || a.virtAPI == "" {
		return nil
	}
	return &launcherv1.NodeCheck{URL: a.virtAPI, CA: a.virtAPICA, ServerName: agentv1.VirtAPIServerName(a.Secret.Namespace)}
}

// requestTimeout bounds one certificate request (virt-api signs within a second when it runs).
const requestTimeout = 2 * time.Minute

// retryWait is the wait after the failures+1-th failure in a row: 5 s, doubling up to 5 minutes (each
// failed request may leave a CSR behind until the kube-controller-manager removes it).
func retryWait(failures int) time.Duration {
	if failures >= 6 {
		return 5 * time.Minute
	}
	return 5 * time.Second << failures
}

// NeedLeaderElection is false: every node agent serves its own node.
func (a *AgentTLS) NeedLeaderElection() bool { return false }

// Start loads the CA and gets a certificate at once, then checks both every Refresh (after a failure:
// retryWait).
func (a *AgentTLS) Start(ctx context.Context) error {
	if a.Clock == nil {
		a.Clock = clock.RealClock{}
	}
	logger := log.FromContext(ctx).WithName("agent-tls").WithValues("secret", a.Secret.String())
	failures := 0
	for {
		wait := a.Refresh
		if err := a.refresh(ctx); err != nil {
			logger.Error(err, "Node agent certificate; calls from virt-api and other agents fail until it is in place")
			wait = retryWait(failures)
			failures++
		} else {
			failures = 0
			if a.VirtAPIService != "" && a.NodeCheck() == nil { // virt-api's CA or Service not there yet: launchers need them
				wait = retryWait(0)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-a.Clock.After(wait):
		}
	}
}

// refresh reads the CA and asks for a certificate when there is none, it is due for renewal, or it
// does not chain to the CA (rotated).
func (a *AgentTLS) refresh(ctx context.Context) error {
	sec := &corev1.Secret{}
	if err := a.Reader.Get(ctx, a.Secret, sec); err != nil {
		return fmt.Errorf("read secret %s: %w", a.Secret, err)
	}
	roots, err := agentv1.Roots(sec.Data)
	if err != nil {
		return fmt.Errorf("secret %s: %w", a.Secret, err)
	}
	virtAPI := a.virtAPIAddress(ctx)
	a.mu.Lock()
	a.roots = roots
	a.virtAPICA = sec.Data[agentv1.VirtAPICAKey] // launchers check it (x509) when they use it
	if virtAPI != "" {
		a.virtAPI = virtAPI
	}
	cert := a.cert
	a.mu.Unlock()
	if cert != nil && !a.due(cert.Leaf, roots) {
		return nil
	}
	next, err := a.request(ctx)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.cert = next
	a.mu.Unlock()
	log.FromContext(ctx).Info("Node agent certificate issued", "identity", next.Leaf.Subject.CommonName, "notAfter", next.Leaf.NotAfter)
	return nil
}

// virtAPIAddress is https://CLUSTER-IP:PORT of virt-api's Service; "" when it cannot be read now
// (logged: the last one known stays).
func (a *AgentTLS) virtAPIAddress(ctx context.Context) string {
	if a.VirtAPIService == "" {
		return ""
	}
	svc := &corev1.Service{}
	if err := a.Reader.Get(ctx, types.NamespacedName{Namespace: a.Secret.Namespace, Name: a.VirtAPIService}, svc); err != nil {
		log.FromContext(ctx).Error(err, "virt-api's Service: launchers keep the address they were given")
		return ""
	}
	ip := svc.Spec.ClusterIP
	if ip == "" || ip == corev1.ClusterIPNone || len(svc.Spec.Ports) == 0 {
		return ""
	}
	return "https://" + net.JoinHostPort(ip, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
}

// due reports whether leaf should be replaced: two thirds of its life are over, or it does not
// chain to roots.
func (a *AgentTLS) due(leaf *x509.Certificate, roots *x509.CertPool) bool {
	renew := leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore) * 2 / 3)
	if a.Clock.Now().After(renew) {
		return true
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, CurrentTime: a.Clock.Now()})
	return err != nil
}

// request generates a key and asks for its certificate.
func (a *AgentTLS) request(ctx context.Context) (*tls.Certificate, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: agentv1.NodeIdentity(a.NodeName)}}, key)
	if err != nil {
		return nil, fmt.Errorf("certificate request: %w", err)
	}
	life := agentv1.CertificateLifetime
	name, uid, err := csr.RequestCertificateWithContext(ctx, a.CSRs, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
		"", agentv1.SignerName, &life, agentv1.CertificateUsages, key)
	if err != nil {
		return nil, fmt.Errorf("request a node agent certificate (signer %s): %w", agentv1.SignerName, err)
	}
	crt, err := csr.WaitForCertificate(ctx, a.CSRs, name, uid)
	if err != nil {
		return nil, fmt.Errorf("wait for certificate signing request %s (signed by virt-api): %w", name, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(crt, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		return nil, fmt.Errorf("certificate signing request %s: %w", name, err)
	}
	if got, want := cert.Leaf.Subject.CommonName, agentv1.NodeIdentity(a.NodeName); got != want {
		return nil, fmt.Errorf("certificate signing request %s: issued for %q, not %q", name, got, want)
	}
	return &cert, nil
}

func (a *AgentTLS) current() (*tls.Certificate, *x509.CertPool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.cert, a.roots
}

// PeerConfig is the client side towards the agent of node (a live migration's streams): the agent's
// certificate, and only node's agent accepted.
func (a *AgentTLS) PeerConfig(node string) (*tls.Config, error) {
	cert, roots := a.current()
	if cert == nil || roots == nil {
		return nil, errors.New("no node agent certificate yet")
	}
	return agentv1.ClientConfig(cert, roots, node), nil
}

// TLSConfig is the server side: each handshake uses the certificate and CA loaded last and requires a
// client certificate of that CA; which identity may call what is the handlers' concern
// (SubresourceServer).
func (a *AgentTLS) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, roots := a.current()
			if cert == nil || roots == nil {
				return nil, errors.New("no node agent certificate yet")
			}
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*cert},
				ClientAuth:   tls.RequireAndVerifyClientCert,
				ClientCAs:    roots,
			}, nil
		},
	}
}
