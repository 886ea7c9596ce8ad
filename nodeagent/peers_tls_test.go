package nodeagent_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
	"github.com/podvirt/podvirt/nodeagent"
)

// Agents ask each other over their mutual TLS: only another node's agent gets an answer (virt-api,
// the agent's own identity and callers without a certificate do not), and the asker accepts only
// the agent of the node it meant.
func TestPeersAskEachOtherOverMutualTLS(t *testing.T) {
	ca := newTestCA(t)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	answered := 0
	s := &nodeagent.SubresourceServer{NodeName: "n2", APICaller: agentv1.VirtAPIIdentity("podvirt"),
		AnswerPeer: func() agentv1.PeerContact { answered++; return agentv1.PeerContact{CutOff: true} }}
	srv := httptest.NewUnstartedServer(s.Handler())
	s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*ca.agentCert(t, agentv1.NodeIdentity("n2"))}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool}
	srv.TLS = s.TLSConfig
	srv.StartTLS()
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "https://")
	asker := func(identity string) func(ctx context.Context, p nodeagent.Peer) (bool, error) {
		cert := ca.agentCert(t, identity)
		return nodeagent.PeerAsker(func(node string) (*tls.Config, error) { return agentv1.ClientConfig(cert, pool, node), nil })
	}
	ctx := context.Background()

	cut, err := asker(agentv1.NodeIdentity("n1"))(ctx, nodeagent.Peer{Node: "n2", Address: addr})
	require.NoError(t, err)
	assert.True(t, cut)
	assert.Equal(t, 1, answered)

	for _, who := range []string{agentv1.VirtAPIIdentity("podvirt"), agentv1.NodeIdentity("n2"), "someone"} {
		_, err := asker(who)(ctx, nodeagent.Peer{Node: "n2", Address: addr})
		assert.ErrorContains(t, err, "403", "asked as %s", who)
	}
	_, err = asker(agentv1.NodeIdentity("n1"))(ctx, nodeagent.Peer{Node: "n3", Address: addr})
	assert.ErrorContains(t, err, `names "podvirt:node:n2", not "podvirt:node:n3"`, "the answer of another node's agent")
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, InsecureSkipVerify: true}}}).Get(srv.URL + agentv1.PathPeerContact) //nolint:gosec // a caller without a certificate
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "no certificate")
	assert.Equal(t, 1, answered, "only the other node's agent was answered")
}
