package admission

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T, name string) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return testCA{cert: cert, key: key}
}

func (ca testCA) issue(t *testing.T, cn string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// fixedCAs is a loaded (or, with none, a not yet loaded) client CA bundle.
type fixedCAs struct{ pool *x509.CertPool }

func (f fixedCAs) VerifyOptions() (x509.VerifyOptions, bool) {
	return x509.VerifyOptions{Roots: f.pool}, f.pool != nil
}

// A forged AdmissionReview from anyone but the kube-apiserver gets no answer: the TLS handshake
// fails without the cluster CA's client certificate of an allowed name.
func TestRequireCallers(t *testing.T) {
	cluster, other := newTestCA(t, "cluster-ca"), newTestCA(t, "other-ca")
	pool := x509.NewCertPool()
	pool.AddCert(cluster.cert)
	const caller = "podvirt-webhook-client"
	cases := []struct {
		name   string
		cas    fixedCAs
		client []tls.Certificate
		ok     bool
	}{
		{"the apiserver's certificate", fixedCAs{pool}, []tls.Certificate{cluster.issue(t, caller, x509.ExtKeyUsageClientAuth)}, true},
		{"no certificate (a Pod)", fixedCAs{pool}, nil, false},
		{"another CA's certificate of the right name", fixedCAs{pool}, []tls.Certificate{other.issue(t, caller, x509.ExtKeyUsageClientAuth)}, false},
		{"a cluster user's certificate", fixedCAs{pool}, []tls.Certificate{cluster.issue(t, "alice", x509.ExtKeyUsageClientAuth)}, false},
		{"a serving certificate of the right name", fixedCAs{pool}, []tls.Certificate{cluster.issue(t, caller, x509.ExtKeyUsageServerAuth)}, false},
		{"client CA not loaded yet", fixedCAs{}, []tls.Certificate{cluster.issue(t, caller, x509.ExtKeyUsageClientAuth)}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("allowed")) }))
			srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
			RequireCallers(c.cas, []string{caller})(srv.TLS)
			srv.StartTLS()
			defer srv.Close()
			tr := srv.Client().Transport.(*http.Transport).Clone()
			tr.TLSClientConfig.Certificates = c.client
			resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Post(srv.URL+PathEvictLauncher, "application/json", nil)
			if c.ok {
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				return
			}
			if err == nil {
				resp.Body.Close()
			}
			assert.Error(t, err, "the handshake must fail")
		})
	}
}
