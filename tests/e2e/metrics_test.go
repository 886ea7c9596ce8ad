//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podvirt/podvirt/tests/framework"
)

// Metrics answer only callers the kube-apiserver authenticates and authorizes: anyone on the Pod
// network reaches the node agent's port (its node's address) and virt-controller's Pod, and used to
// read both over plain HTTP.
func TestMetricsNeedAuthorization(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	ctx := f.Context()
	token := func(sa string) string {
		f.Create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}})
		tr, err := f.Clientset.CoreV1().ServiceAccounts(f.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("token of %s: %v", sa, err)
		}
		return tr.Status.Token
	}
	scraper, nobody := token("scraper"), token("nobody")
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-metrics-reader-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "podvirt:metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: f.Namespace, Name: "scraper"}},
	}
	if err := f.Client.Create(ctx, crb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Client.Delete(context.Background(), crb) })

	pods := &corev1.PodList{}
	if err := f.Client.List(ctx, pods, client.InNamespace("podvirt"), client.MatchingLabels{"app.kubernetes.io/name": "virt-controller"}); err != nil || len(pods.Items) == 0 {
		t.Fatalf("virt-controller's Pod: %v (%d found)", err, len(pods.Items))
	}
	agentHost, _, _ := net.SplitHostPort(nodeAgentAddr)
	endpoints := map[string]string{
		"node agent":      "https://" + net.JoinHostPort(agentHost, "8187") + "/metrics",
		"virt-controller": "https://" + net.JoinHostPort(pods.Items[0].Status.PodIP, "8080") + "/metrics",
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed serving certificate; the test checks who is let in
	get := func(ctx context.Context, url, bearer string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	for name, url := range endpoints {
		if code, err := get(ctx, "http"+url[len("https"):], ""); err == nil && code < 400 {
			t.Errorf("%s: plain HTTP answered %d", name, code)
		}
		if code, err := get(ctx, url, ""); code != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d %v, want 401", name, code, err)
		}
		f.Eventually(fmt.Sprintf("%s refuses a ServiceAccount without the role and serves the scraper", name), time.Minute, func(ctx context.Context) (bool, error) {
			denied, err := get(ctx, url, nobody)
			if err != nil {
				return false, err
			}
			served, err := get(ctx, url, scraper)
			return denied == http.StatusForbidden && served == http.StatusOK, err
		})
	}
}
