package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// certSpec is one certificate the cluster needs.
type certSpec struct {
	file   string // base name under pki/: FILE.crt and FILE.key
	ca     string // issuing CA's base name
	cn     string
	orgs   []string
	server bool
	client bool
	dns    []string
	ips    []net.IP
}

// kubeconfigSpec is a kubeconfig for one client certificate.
type kubeconfigSpec struct {
	path string
	cert string
}

// identities of the control-plane clients (certificate CN and organisation).
const (
	frontProxyClientCN = "front-proxy-client"
	provisionerCN      = "podvirt-provisioner"
	// WebhookClientCN is the identity the kube-apiserver presents to admission webhooks (no group,
	// no rights): virt-api answers only it on its webhook port (install/local: --webhook-client-names).
	WebhookClientCN = "podvirt-webhook-client"
)

func (c Config) certSpecs() []certSpec {
	nodeIP := net.IP(c.NodeIP.AsSlice())
	svcIP := net.IP(c.kubernetesServiceIP().AsSlice())
	loop := net.IPv4(127, 0, 0, 1)
	specs := []certSpec{
		{file: "apiserver", ca: "ca", cn: "kube-apiserver", server: true, ips: []net.IP{nodeIP, svcIP, loop},
			dns: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost", c.NodeName}},
		{file: "apiserver-kubelet-client", ca: "ca", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true},
		{file: "admin", ca: "ca", cn: "podvirt-admin", orgs: []string{"system:masters"}, client: true},
		{file: "controller-manager", ca: "ca", cn: "system:kube-controller-manager", client: true},
		{file: "scheduler", ca: "ca", cn: "system:kube-scheduler", client: true},
		{file: "kube-proxy", ca: "ca", cn: "system:kube-proxy", client: true},
		{file: "provisioner", ca: "ca", cn: provisionerCN, orgs: []string{"system:masters"}, client: true},
		{file: "coredns", ca: "ca", cn: coreDNSUser, client: true},
		{file: "front-proxy-client", ca: "front-proxy-ca", cn: frontProxyClientCN, client: true},
		{file: "webhook-client", ca: "ca", cn: WebhookClientCN, client: true},
	}
	for _, n := range c.nodes() {
		specs = append(specs,
			certSpec{file: n.comp("kubelet-client"), ca: "ca", cn: "system:node:" + n.name, orgs: []string{"system:nodes"}, client: true},
			certSpec{file: n.comp("kubelet-serving"), ca: "ca", cn: n.name, server: true,
				ips: []net.IP{net.IP(n.ip.AsSlice()), loop}, dns: []string{n.name, "localhost"}})
	}
	return specs
}

func (c Config) kubeconfigSpecs() []kubeconfigSpec {
	specs := []kubeconfigSpec{
		{path: c.Kubeconfig(), cert: "admin"},
		{path: c.path("kubeconfigs", "controller-manager.kubeconfig"), cert: "controller-manager"},
		{path: c.path("kubeconfigs", "scheduler.kubeconfig"), cert: "scheduler"},
		{path: c.path("kubeconfigs", "kube-proxy.kubeconfig"), cert: "kube-proxy"},
		{path: c.path("kubeconfigs", "provisioner.kubeconfig"), cert: "provisioner"},
		{path: c.path("kubeconfigs", "coredns.kubeconfig"), cert: "coredns"},
	}
	for _, n := range c.nodes() {
		specs = append(specs, kubeconfigSpec{path: c.kubeletKubeconfig(n), cert: n.comp("kubelet-client")})
	}
	return specs
}

func (c Config) pki(name string) string { return filepath.Join(c.pkiDir(), name) }

// ensurePKI makes the CAs, certificates, service-account key pair and kubeconfigs that are missing.
func (c Config) ensurePKI() error {
	if err := os.MkdirAll(c.pkiDir(), 0o700); err != nil {
		return err
	}
	for _, ca := range []string{"ca", "front-proxy-ca"} {
		if err := c.ensureCA(ca); err != nil {
			return err
		}
	}
	for _, s := range c.certSpecs() {
		if err := c.ensureCert(s); err != nil {
			return fmt.Errorf("certificate %s: %w", s.file, err)
		}
	}
	if err := c.ensureServiceAccountKey(); err != nil {
		return err
	}
	for _, k := range c.kubeconfigSpecs() {
		if err := c.writeKubeconfig(k); err != nil {
			return fmt.Errorf("kubeconfig %s: %w", k.path, err)
		}
	}
	return nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func (c Config) ensureCA(name string) error {
	if exists(c.pki(name + ".crt")) {
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "podvirt-" + name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return fmt.Errorf("self-sign %s: %w", name, err)
	}
	return c.writeKeyPair(name, der, key)
}

func (c Config) ensureCert(s certSpec) error {
	if exists(c.pki(s.file + ".crt")) {
		return nil
	}
	caCert, caKey, err := c.loadKeyPair(s.ca)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: s.cn, Organization: s.orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     s.dns,
		IPAddresses:  s.ips,
	}
	if s.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if s.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	return c.writeKeyPair(s.file, der, key)
}

func (c Config) ensureServiceAccountKey() error {
	if exists(c.pki("sa.key")) {
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.pki("sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return err
	}
	return writeKey(c.pki("sa.key"), key)
}

func (c Config) writeKeyPair(name string, der []byte, key *ecdsa.PrivateKey) error {
	if err := writeKey(c.pki(name+".key"), key); err != nil {
		return err
	}
	return os.WriteFile(c.pki(name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func writeKey(p string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

func (c Config) loadKeyPair(name string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(c.pki(name + ".crt"))
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(c.pki(name + ".key"))
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("pki " + name + ": no PEM data")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("pki %s: %w", name, err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("pki %s: %w", name, err)
	}
	return cert, key, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func (c Config) writeKubeconfig(k kubeconfigSpec) error {
	if exists(k.path) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(k.path), 0o700); err != nil {
		return err
	}
	const name = "podvirt"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: c.APIServerURL(), CertificateAuthority: c.pki("ca.crt")}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificate: c.pki(k.cert + ".crt"), ClientKey: c.pki(k.cert + ".key")}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*cfg, k.path)
}
