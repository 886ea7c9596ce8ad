package apiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	certificatesv1 "k8s.io/api/certificates/v1"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
)

// csrPEM is a signed certificate request of tmpl.
func csrPEM(t *testing.T, curve elliptic.Curve, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestDecideCSR(t *testing.T) {
	requester := RequesterOf("podvirt")
	good := func() *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName: agentv1.SignerName, Username: requester, Usages: agentv1.CertificateUsages,
			Extra:   map[string]certificatesv1.ExtraValue{agentv1.NodeNameExtra: {"node-a"}},
			Request: csrPEM(t, elliptic.P256(), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "podvirt:node:node-a"}}),
		}}
	}
	cond := func(ty certificatesv1.RequestConditionType) func(*certificatesv1.CertificateSigningRequest) {
		return func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: ty})
		}
	}
	for name, tc := range map[string]struct {
		mutate []func(*certificatesv1.CertificateSigningRequest)
		age    time.Duration
		want   signerAction
		why    string
	}{
		"an agent asking for its node's certificate is approved": {want: signerApprove},
		"then signed":          {mutate: []func(*certificatesv1.CertificateSigningRequest){cond(certificatesv1.CertificateApproved)}, want: signerSign},
		"and left once issued": {mutate: []func(*certificatesv1.CertificateSigningRequest){cond(certificatesv1.CertificateApproved), func(c *certificatesv1.CertificateSigningRequest) { c.Status.Certificate = []byte("x") }}, want: signerNone},
		"another signer's":     {mutate: []func(*certificatesv1.CertificateSigningRequest){func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "kubernetes.io/kubelet-serving" }}, want: signerNone},
		"denied stays denied":  {mutate: []func(*certificatesv1.CertificateSigningRequest){cond(certificatesv1.CertificateDenied)}, want: signerNone},
		"failed stays failed":  {mutate: []func(*certificatesv1.CertificateSigningRequest){cond(certificatesv1.CertificateFailed)}, want: signerNone},
		"another node's name (root on node-a)": {mutate: []func(*certificatesv1.CertificateSigningRequest){func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, elliptic.P256(), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "podvirt:node:node-b"}})
		}}, want: signerDeny, why: "must be exactly CN=podvirt:node:node-a"},
		"virt-api's name": {mutate: []func(*certificatesv1.CertificateSigningRequest){func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, elliptic.P256(), &x509.CertificateRequest{Subject: pkix.Name{CommonName: agentv1.VirtAPIIdentity("podvirt")}})
		}}, want: signerDeny, why: "must be exactly CN=podvirt:node:node-a"},
		"an extra subject field": {mutate: []func(*certificatesv1.CertificateSigningRequest){func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, elliptic.P256(), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "podvirt:node:node-a", Organization: []string{"system:masters"}}})
		}}, want: signerDeny, why: "must be exactly CN="},
		"a SAN": {mutate: []func(*certificatesv1.CertificateSigningRequest){func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, elliptic.P256(), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "podvirt:node:node-a"}, URIs: []*url.URL{{Scheme: "spiffe", Host: "x"}}})
		}}, want: signerDeny, why: "subject alternative names"},
		"a weak curve": {mutate: []func(*certificatesv1.CertificateSigningRequest){func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, elliptic.P224(), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "podvirt:node:node-a"}})
		}}, want: signerDeny, why: "only ECDSA P-256"},
		"another key type (costly signatures)": {mutate: []func(*certificatesv1.CertificateSigningRequest){func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, elliptic.P384(), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "podvirt:node:node-a"}})
		}}, want: signerDeny, why: "only ECDSA P-256"},
		"an oversized request": {mutate: []func(*certificatesv1.CertificateSigningRequest){func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = append(c.Spec.Request, make([]byte, 8<<10)...)
		}}, want: signerDeny, why: "more than the 4096"},
		"a long subject is not echoed whole": {mutate: []func(*certificatesv1.CertificateSigningRequest){func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, elliptic.P256(), &x509.CertificateRequest{Subject: pkix.Name{CommonName: strings.Repeat("x", 2000)}})
		}}, want: signerDeny, why: `xxxx": must be exactly`},
		"pending too long (a removed node's, or from before a CA rotation)": {age: 11 * time.Minute, want: signerDeny, why: "pending for more than 10m0s"},
		"approved, then pending too long":                                   {mutate: []func(*certificatesv1.CertificateSigningRequest){cond(certificatesv1.CertificateApproved)}, age: 11 * time.Minute, want: signerFail, why: "pending for more than"},
		"garbage":                                                           {mutate: []func(*certificatesv1.CertificateSigningRequest){func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("not pem") }}, want: signerDeny, why: "spec.request"},
		"two PEM blocks": {mutate: []func(*certificatesv1.CertificateSigningRequest){func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = append(c.Spec.Request, c.Spec.Request...)
		}}, want: signerDeny, why: "not one PEM"},
		"another user": {mutate: []func(*certificatesv1.CertificateSigningRequest){func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Username = "system:serviceaccount:tenant:default"
		}}, want: signerDeny, why: "spec.username"},
		"a token naming no node": {mutate: []func(*certificatesv1.CertificateSigningRequest){func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Extra = nil }}, want: signerDeny, why: agentv1.NodeNameExtra},
		"a token naming two nodes": {mutate: []func(*certificatesv1.CertificateSigningRequest){func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Extra[agentv1.NodeNameExtra] = certificatesv1.ExtraValue{"node-a", "node-b"}
		}}, want: signerDeny, why: "names 2 nodes"},
		"a CA usage": {mutate: []func(*certificatesv1.CertificateSigningRequest){func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageCertSign)
		}}, want: signerDeny, why: `"cert sign" is not signed`},
		"a missing usage": {mutate: []func(*certificatesv1.CertificateSigningRequest){func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
		}}, want: signerDeny, why: `"server auth" is missing`},
		"a bad request approved by someone else is not signed": {mutate: []func(*certificatesv1.CertificateSigningRequest){cond(certificatesv1.CertificateApproved), func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Username = "mallory" }}, want: signerFail, why: "spec.username"},
	} {
		t.Run(name, func(t *testing.T) {
			csr := good()
			for _, m := range tc.mutate {
				m(csr)
			}
			got, why := decideCSR(csr, requester, csr.CreationTimestamp.Add(tc.age))
			assert.Equal(t, tc.want, got)
			if tc.why != "" {
				assert.Contains(t, why, tc.why)
			}
			assert.Less(t, len(why), 400, "a denial's message is short, whatever the request holds")
		})
	}
}
