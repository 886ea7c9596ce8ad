package v1_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
)

func TestKeyPair(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	good := map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, agentv1.CACertKey: certPEM}
	if _, pool, err := agentv1.KeyPair(good); err != nil || pool == nil {
		t.Fatalf("a good key pair and CA: %v", err)
	}
	for name, data := range map[string]map[string][]byte{
		"no CA":       {corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
		"no key":      {corev1.TLSCertKey: certPEM, agentv1.CACertKey: certPEM},
		"garbage key": {corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: []byte("x"), agentv1.CACertKey: certPEM},
	} {
		if _, _, err := agentv1.KeyPair(data); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
