package nodeagent_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/certificate/csr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	"github.com/podvirt/podvirt/apiserver"
	"github.com/podvirt/podvirt/internal/testenv"
	"github.com/podvirt/podvirt/nodeagent"
)

// testCA is a node CA: its certificate and key in PEM, and a signer of client certificates.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "podvirt-node-ca"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}
}

// clientCert issues a client certificate named cn, as the rotator issues virt-api's.
func (ca *testCA) clientCert(t *testing.T, cn string) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// agentCert issues a certificate named cn for client and server auth, as the signer issues an agent's.
func (ca *testCA) agentCert(t *testing.T, cn string) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// startSigner runs virt-api's signer of the agents' certificates against the test apiserver.
func startSigner(t *testing.T, e *testenv.Env, caSecret types.NamespacedName) {
	t.Helper()
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{Scheme: e.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{&certificatesv1.CertificateSigningRequest{}: apiserver.SignerCache()}}})
	require.NoError(t, err)
	require.NoError(t, (&apiserver.NodeSigner{Client: mgr.GetClient(), CA: caSecret, Requester: apiserver.RequesterOf(heartbeatv1.Namespace)}).SetupWithManager(mgr))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
}

// startAgentTLS runs node's AgentTLS with the agent's own (impersonated) credentials until it holds
// a certificate.
func startAgentTLS(t *testing.T, e *testenv.Env, node string, caCopy types.NamespacedName) *nodeagent.AgentTLS {
	t.Helper()
	cfg := agentConfig(e, node)
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	reader, err := client.New(cfg, client.Options{Scheme: e.Scheme})
	require.NoError(t, err)
	a := &nodeagent.AgentTLS{Reader: reader, Secret: caCopy, CSRs: kube, NodeName: node, Refresh: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Start(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	require.Eventually(t, func() bool { _, err := a.PeerConfig("any"); return err == nil }, wait, 50*time.Millisecond, "%s's agent gets its certificate", node)
	return a
}

// Each agent holds a certificate naming its own node, which it got from virt-api's signer with its
// Pod's token; root on one node holds that node's key and nothing more. Its certificate opens no
// console (only virt-api's does), is not taken for another node's agent by virt-api or a migration's
// source, and the signer gives it no other node's name.
func TestAgentsHoldCertificatesOfTheirOwnNodeOnly(t *testing.T) {
	e := testenv.Require(t, env)
	ctx := context.Background()
	ensureNamespace(t, heartbeatv1.Namespace)
	applyShipped(t, "rbac.yaml", "policy.yaml")
	for _, obj := range readManifestsAt(t, "virt-api", "signer-policy.yaml") {
		require.NoError(t, e.Client.Create(ctx, obj))
		t.Cleanup(func() { _ = e.Client.Delete(ctx, obj) })
	}
	ca := newTestCA(t)
	caSecret := types.NamespacedName{Namespace: heartbeatv1.Namespace, Name: "virt-handler-ca"}
	caCopy := types.NamespacedName{Namespace: heartbeatv1.Namespace, Name: agentv1.CertSecret}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: caSecret.Namespace, Name: caSecret.Name}, Data: map[string][]byte{agentv1.CACertKey: ca.certPEM, "ca.key": ca.keyPEM}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: caCopy.Namespace, Name: caCopy.Name}, Data: map[string][]byte{agentv1.CACertKey: ca.certPEM}},
	} {
		require.NoError(t, e.Client.Create(ctx, s))
		t.Cleanup(func() { _ = e.Client.Delete(ctx, s) })
	}
	startSigner(t, e, caSecret)
	a, b := startAgentTLS(t, e, "node-a", caCopy), startAgentTLS(t, e, "node-b", caCopy)

	// node-a's agent serves its subresources over its own certificate.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &nodeagent.SubresourceServer{Listener: ln, Reader: e.Client, NodeName: "node-a", TLSConfig: a.TLSConfig(), APICaller: agentv1.VirtAPIIdentity(heartbeatv1.Namespace)}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Start(sctx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-served) })
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	virtAPI := ca.clientCert(t, agentv1.VirtAPIIdentity(heartbeatv1.Namespace))
	ns := e.Namespace(t)
	call := func(cfg *tls.Config, method, path string) (int, error) {
		c := &http.Client{Timeout: wait, Transport: &http.Transport{TLSClientConfig: cfg}}
		defer c.CloseIdleConnections()
		req, err := http.NewRequestWithContext(ctx, method, "https://"+ln.Addr().String()+path, nil)
		require.NoError(t, err)
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	pause := agentv1.Path(agentv1.PathPause, ns, "none")
	code, err := call(agentv1.ClientConfig(virtAPI, roots, "node-a"), http.MethodPut, pause)
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, code, "virt-api, calling node-a's agent, is served (no such instance)")

	_, err = call(agentv1.ClientConfig(virtAPI, roots, "node-b"), http.MethodPut, pause)
	assert.ErrorContains(t, err, `names "podvirt:node:node-a", not "podvirt:node:node-b"`, "virt-api, meaning node-b, refuses node-a's agent (an address written by root on node-a)")

	peerB, err := b.PeerConfig("node-a")
	require.NoError(t, err)
	for _, c := range []struct{ method, path string }{
		{http.MethodPut, pause}, {http.MethodGet, agentv1.Path(agentv1.PathConsole, ns, "none")}, {http.MethodGet, agentv1.Path(agentv1.PathVNC, ns, "none")},
	} {
		code, err = call(peerB, c.method, c.path)
		require.NoError(t, err)
		assert.Equal(t, http.StatusForbidden, code, "node-b's agent (root on node-b) calls %s on node-a", c.path)
	}
	code, err = call(agentv1.ClientConfig(virtAPI, roots, "node-a"), http.MethodGet, agentv1.MigrationStreamPath(ns, "virt-launcher-x", "migration"))
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, code, "virt-api's certificate sends no migration")

	// The signer names no other node, the agent asks no other signer, and no one else asks it.
	kubeA, err := kubernetes.NewForConfig(agentConfig(e, "node-a"))
	require.NoError(t, err)
	admin, err := kubernetes.NewForConfig(e.Config)
	require.NoError(t, err)
	probeKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	probeDER, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "probe"}}, probeKey)
	require.NoError(t, err)
	probe := func(kube kubernetes.Interface, signer string) error {
		created, err := kube.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"},
			Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: signer, Usages: agentv1.CertificateUsages,
				Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: probeDER})},
		}, metav1.CreateOptions{})
		if err == nil {
			_ = admin.CertificatesV1().CertificateSigningRequests().Delete(ctx, created.Name, metav1.DeleteOptions{})
		}
		return err
	}
	eventually(t, "the CSR policies are in force", func() bool {
		byAdmin, byAgent := probe(admin, agentv1.SignerName), probe(kubeA, "kubernetes.io/kubelet-serving")
		return byAdmin != nil && strings.Contains(byAdmin.Error(), "only the node agents") &&
			byAgent != nil && strings.Contains(byAgent.Error(), "asks only Podvirt's signer")
	})
	for name, tc := range map[string]struct {
		kube       kubernetes.Interface
		cn, signer string
		pad        int
		want       string
	}{
		"another node":      {kubeA, "podvirt:node:node-b", agentv1.SignerName, 0, "must be exactly CN=podvirt:node:node-a"},
		"virt-api":          {kubeA, agentv1.VirtAPIIdentity(heartbeatv1.Namespace), agentv1.SignerName, 0, "must be exactly CN=podvirt:node:node-a"},
		"the kubelet's CA":  {kubeA, "system:node:node-b", "kubernetes.io/kube-apiserver-client-kubelet", 0, "asks only Podvirt's signer"},
		"the kubelet's own": {kubeA, "system:node:node-a", "kubernetes.io/kubelet-serving", 0, "asks only Podvirt's signer"},
		"a large request":   {kubeA, "podvirt:node:node-a", agentv1.SignerName, 8 << 10, "larger than an agent's request"},
		"anyone else":       {admin, "podvirt:node:node-a", agentv1.SignerName, 0, "only the node agents"},
	} {
		t.Run(name, func(t *testing.T) {
			key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			require.NoError(t, err)
			tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: tc.cn}}
			if tc.pad > 0 {
				tmpl.ExtraExtensions = []pkix.Extension{{Id: []int{1, 3, 6, 1, 4, 1, 99999, 1}, Value: make([]byte, tc.pad)}}
			}
			der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
			require.NoError(t, err)
			usages := agentv1.CertificateUsages
			if tc.signer != agentv1.SignerName {
				usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
			}
			name, uid, err := csr.RequestCertificateWithContext(ctx, tc.kube, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), "", tc.signer, nil, usages, key)
			if err != nil {
				assert.ErrorContains(t, err, tc.want)
				return
			}
			t.Cleanup(func() {
				_ = admin.CertificatesV1().CertificateSigningRequests().Delete(ctx, name, metav1.DeleteOptions{})
			})
			wctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			_, err = csr.WaitForCertificate(wctx, tc.kube, name, uid)
			require.Error(t, err, "a certificate for %s was issued to node-a's agent", tc.cn)
			got, gerr := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, gerr)
			var msg string
			for _, c := range got.Status.Conditions {
				if c.Type == certificatesv1.CertificateDenied {
					msg = c.Message
				}
			}
			assert.Contains(t, msg, tc.want, "denied, saying why")
			assert.Empty(t, got.Status.Certificate)
		})
	}
}
