package v1_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
)

// issue makes a certificate named cn with usages, signed by parent (self-signed CA when nil).
func issue(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, usages ...x509.ExtKeyUsage) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: usages, KeyUsage: x509.KeyUsageDigitalSignature}
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func TestClientConfigAcceptsOnlyTheNodeItMeant(t *testing.T) {
	ca, caKey := issue(t, nil, nil, "podvirt-node-ca")
	other, otherKey := issue(t, nil, nil, "podvirt-node-ca")
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	agentA, _ := issue(t, ca, caKey, agentv1.NodeIdentity("node-a"), x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	virtAPI, _ := issue(t, ca, caKey, agentv1.VirtAPIIdentity("podvirt"), x509.ExtKeyUsageClientAuth)
	forged, _ := issue(t, other, otherKey, agentv1.NodeIdentity("node-a"), x509.ExtKeyUsageServerAuth)
	cfg := agentv1.ClientConfig(&tls.Certificate{}, roots, "node-a")
	for name, tc := range map[string]struct {
		peer []*x509.Certificate
		want string
	}{
		"node-a's agent":                 {[]*x509.Certificate{agentA}, ""},
		"none":                           {nil, "presented no certificate"},
		"another CA's":                   {[]*x509.Certificate{forged}, "unknown authority"},
		"virt-api's client certificate":  {[]*x509.Certificate{virtAPI}, "incompatible key usage"},
		"node-a's agent, meaning node-b": {[]*x509.Certificate{agentA}, `not "podvirt:node:node-b"`},
	} {
		t.Run(name, func(t *testing.T) {
			c := cfg
			if name == "node-a's agent, meaning node-b" {
				c = agentv1.ClientConfig(&tls.Certificate{}, roots, "node-b")
			}
			err := c.VerifyConnection(tls.ConnectionState{PeerCertificates: tc.peer})
			if tc.want == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tc.want)
			}
		})
	}
}

func TestIdentities(t *testing.T) {
	node, ok := agentv1.NodeOf(agentv1.NodeIdentity("vm-1"))
	assert.True(t, ok)
	assert.Equal(t, "vm-1", node)
	for _, id := range []string{agentv1.VirtAPIIdentity("podvirt"), "podvirt:node:", "system:node:vm-1", ""} {
		_, ok := agentv1.NodeOf(id)
		assert.False(t, ok, "%q names no node", id)
	}
	assert.Empty(t, agentv1.Caller(nil))
	assert.Empty(t, agentv1.Caller(&tls.ConnectionState{}), "an unverified peer has no identity")
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: "podvirt:node:vm-1"}}
	assert.Equal(t, "podvirt:node:vm-1", agentv1.Caller(&tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}))
}
