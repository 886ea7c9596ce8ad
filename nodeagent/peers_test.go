package nodeagent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
)

// testCA issues certificates of the agents' CA for the peer tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "podvirt-ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue is a certificate for cn, for client and server auth as the agents' are.
func (ca *testCA) issue(t *testing.T, cn string) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// Agents ask each other over their mutual TLS: only another node's agent gets an answer (virt-api,
// the agent's own identity and callers without a certificate do not), and the asker accepts only
// the agent of the node it meant.
func TestPeersAskEachOtherOverMutualTLS(t *testing.T) {
	ca := newTestCA(t)
	answered := 0
	s := &SubresourceServer{NodeName: "n2", APICaller: agentv1.VirtAPIIdentity("podvirt"),
		AnswerPeer: func() agentv1.PeerContact { answered++; return agentv1.PeerContact{CutOff: true} }}
	srv := httptest.NewUnstartedServer(s.Handler())
	s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{ca.issue(t, agentv1.NodeIdentity("n2"))}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.pool}
	srv.TLS = s.TLSConfig
	srv.StartTLS()
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "https://")
	asker := func(identity string) func(ctx context.Context, p Peer) (bool, error) {
		cert := ca.issue(t, identity)
		return PeerAsker(func(node string) (*tls.Config, error) { return agentv1.ClientConfig(&cert, ca.pool, node), nil })
	}
	ctx := context.Background()

	cut, err := asker(agentv1.NodeIdentity("n1"))(ctx, Peer{Node: "n2", Address: addr})
	require.NoError(t, err)
	assert.True(t, cut)
	assert.Equal(t, 1, answered)

	for _, who := range []string{agentv1.VirtAPIIdentity("podvirt"), agentv1.NodeIdentity("n2"), "someone"} {
		_, err := asker(who)(ctx, Peer{Node: "n2", Address: addr})
		assert.ErrorContains(t, err, "403", "asked as %s", who)
	}
	_, err = asker(agentv1.NodeIdentity("n1"))(ctx, Peer{Node: "n3", Address: addr})
	assert.ErrorContains(t, err, `names "podvirt:node:n2", not "podvirt:node:n3"`, "the answer of another node's agent")
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool, InsecureSkipVerify: true}}}).Get(srv.URL + agentv1.PathPeerContact) //nolint:gosec // a caller without a certificate
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "no certificate")
	assert.Equal(t, 1, answered, "only the other node's agent was answered")
}

// One peer's word is enough only when it is the only one asked: with more, one compromised node
// alone cannot keep another node's guests running.
func TestConfirmsNeedsAQuorum(t *testing.T) {
	for _, tc := range []struct {
		yes, asked int
		want       bool
	}{{0, 0, false}, {0, 1, false}, {1, 1, true}, {1, 2, false}, {2, 2, true}, {1, 3, false}, {2, 3, true}, {3, 3, true}} {
		assert.Equal(t, tc.want, confirms(tc.yes, tc.asked), "%d yes of %d asked", tc.yes, tc.asked)
	}
}
