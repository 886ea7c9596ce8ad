//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate/csr"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// nodeAgentOf impersonates the node agent's ServiceAccount with a token bound to a Pod on node, as
// root on that node holds it.
func nodeAgentOf(f *framework.Framework, node string) kubernetes.Interface {
	cfg := rest.CopyConfig(f.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + heartbeatv1.Namespace + ":" + agentv1.ServiceAccount,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + heartbeatv1.Namespace, "system:authenticated"},
		Extra:    map[string][]string{agentv1.NodeNameExtra: {node}},
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// requestAgentCert asks Podvirt's signer for a certificate named cn with kube's credentials and
// returns it, or the error (a denial names why).
func requestAgentCert(f *framework.Framework, kube kubernetes.Interface, cn string) (*tls.Certificate, error) {
	t, ctx := f.T(), f.Context()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}}, key)
	if err != nil {
		t.Fatal(err)
	}
	name, uid, err := csr.RequestCertificateWithContext(ctx, kube, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), "", agentv1.SignerName, nil, agentv1.CertificateUsages, key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.Clientset.CertificatesV1().CertificateSigningRequests().Delete(f.Context(), name, metav1.DeleteOptions{})
	})
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	crt, err := csr.WaitForCertificate(wctx, kube, name, uid)
	if err != nil {
		got, gerr := f.Clientset.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if gerr == nil {
			for _, c := range got.Status.Conditions {
				if c.Type == certificatesv1.CertificateDenied {
					return nil, fmt.Errorf("denied: %s", c.Message)
				}
			}
		}
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(crt, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return &cert, err
}

// Root on a node holds its agent's token, and with it can get that node's agent certificate — which
// opens no console, pause or VNC on any agent (only virt-api's certificate does), and the signer
// names no other node in it.
func TestAgentCertificateIsItsNodesOnly(t *testing.T) {
	f := framework.New(t)
	requireVirtAPI(f)
	ctx := f.Context()
	host, _, _ := net.SplitHostPort(nodeAgentAddr)
	nodes, err := f.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var node string
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && a.Address == host {
				node = n.Name
			}
		}
	}
	if node == "" {
		t.Fatalf("no node has InternalIP %s", host)
	}
	agent := nodeAgentOf(f, node)
	if _, err := requestAgentCert(f, agent, agentv1.NodeIdentity("some-other-node")); err == nil || !strings.Contains(err.Error(), "must be exactly CN="+agentv1.NodeIdentity(node)) {
		t.Errorf("node %s's agent asking for another node's certificate: %v, want a denial naming CN=%s", node, err, agentv1.NodeIdentity(node))
	}
	if _, err := requestAgentCert(f, agent, agentv1.VirtAPIIdentity(heartbeatv1.Namespace)); err == nil || !strings.Contains(err.Error(), "must be exactly CN=") {
		t.Errorf("node %s's agent asking for virt-api's certificate: %v, want a denial", node, err)
	}
	own, err := requestAgentCert(f, agent, agentv1.NodeIdentity(node))
	if err != nil {
		t.Fatalf("node %s's agent asking for its own certificate: %v", node, err)
	}
	sec, err := f.Clientset.CoreV1().Secrets(heartbeatv1.Namespace).Get(ctx, agentv1.CertSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	roots, err := agentv1.Roots(sec.Data)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: agentv1.ClientConfig(own, roots, node)}}
	defer c.CloseIdleConnections()
	for _, call := range []struct{ method, path string }{
		{http.MethodPut, agentv1.Path(agentv1.PathPause, f.Namespace, "any")},
		{http.MethodGet, agentv1.Path(agentv1.PathConsole, f.Namespace, "any")},
		{http.MethodGet, agentv1.Path(agentv1.PathVNC, f.Namespace, "any")},
	} {
		req, err := http.NewRequestWithContext(ctx, call.method, "https://"+nodeAgentAddr+call.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s with node %s's agent certificate: %v", call.method, call.path, node, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s %s with node %s's agent certificate: %s, want 403", call.method, call.path, node, resp.Status)
		}
	}
}
