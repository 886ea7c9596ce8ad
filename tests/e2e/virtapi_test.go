//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// requireVirtAPI waits for virt-api and its APIService to be available.
func requireVirtAPI(f *framework.Framework) {
	f.T().Helper()
	requireDeployed(f)
	f.Eventually("subresources.kubevirt.io served", 3*time.Minute, func(ctx context.Context) (bool, error) {
		err := f.Clientset.Discovery().RESTClient().Get().AbsPath("/apis/subresources.kubevirt.io/v1").Do(ctx).Error()
		return err == nil, err
	})
}

// subresourceCall PUTs vm's subresource as the user cfg authenticates and returns the HTTP code.
func subresourceCall(ctx context.Context, t *testing.T, cfg *rest.Config, ns, vm, sub string) (int, error) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res := cs.Discovery().RESTClient().Put().
		AbsPath("/apis/subresources.kubevirt.io/v1/namespaces", ns, "virtualmachines", vm, sub).
		Body([]byte("{}")).Do(ctx)
	var code int
	res.StatusCode(&code)
	return code, res.Error()
}

// as is the e2e credentials impersonating user (and only the groups every user has).
func as(f *framework.Framework, user string) *rest.Config {
	cfg := rest.CopyConfig(f.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	return cfg
}

// grant binds user to Kubernetes' aggregated ClusterRole role (view, edit) in ns.
func grant(f *framework.Framework, ns, user, role string) {
	f.T().Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := f.Client.Create(f.Context(), rb); err != nil {
		f.T().Fatalf("grant %s %s in %s: %v", user, role, ns, err)
	}
}

// RBAC through the aggregation layer: Kubernetes' edit role (which Podvirt's kubevirt.io:edit
// aggregates into) may start, restart and stop a VM in its namespace and nowhere else; view may not;
// nobody unauthenticated may.
func TestSubresourceRBAC(t *testing.T) {
	f := framework.New(t)
	requireVirtAPI(f)
	ctx := f.Context()
	other := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-other-"}}
	if err := f.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Client.Delete(context.Background(), other) })
	for _, ns := range []string{f.Namespace, other.Name} {
		f.Create(demoVM(ns, "vm", virtv1.RunStrategyHalted, 0, ""))
	}
	grant(f, f.Namespace, "alice", "edit")
	grant(f, other.Name, "carol", "edit")
	grant(f, f.Namespace, "bob", "view")
	alice, bob := as(f, "alice"), as(f, "bob")

	// alice's role binding reaches the authorizer's cache within seconds.
	f.Eventually("alice may start vm", time.Minute, func(ctx context.Context) (bool, error) {
		code, err := subresourceCall(ctx, t, alice, f.Namespace, "vm", "start")
		return code == http.StatusAccepted, err
	})
	f.Eventually("the started VM has an instance", 2*time.Minute, func(ctx context.Context) (bool, error) {
		err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: "vm"}, &virtv1.VirtualMachineInstance{})
		return err == nil, err
	})
	for _, sub := range []string{"restart", "stop"} {
		if code, err := subresourceCall(ctx, t, alice, f.Namespace, "vm", sub); code != http.StatusAccepted {
			t.Errorf("alice (edit) %s in her namespace: %d %v, want 202", sub, code, err)
		}
	}
	for _, sub := range []string{"start", "stop", "restart"} {
		if code, err := subresourceCall(ctx, t, alice, other.Name, "vm", sub); code != http.StatusForbidden || !apierrors.IsForbidden(err) {
			t.Errorf("alice %s in another namespace: %d %v, want 403", sub, code, err)
		}
		if code, err := subresourceCall(ctx, t, bob, f.Namespace, "vm", sub); code != http.StatusForbidden {
			t.Errorf("bob (view) %s: %d %v, want 403", sub, code, err)
		}
	}
	bobPause := kubernetes.NewForConfigOrDie(bob).Discovery().RESTClient().Put().
		AbsPath("/apis/subresources.kubevirt.io/v1/namespaces", f.Namespace, "virtualmachineinstances", "vm", "pause").
		Body([]byte("{}")).Do(ctx).Error()
	if !apierrors.IsForbidden(bobPause) {
		t.Errorf("bob (view) pause: want 403, got %v", bobPause)
	}
	anonymous := rest.AnonymousClientConfig(f.Config)
	if code, err := subresourceCall(ctx, t, anonymous, f.Namespace, "vm", "start"); code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Errorf("unauthenticated start: %d %v, want 401 or 403", code, err)
	}
	// The version is every authenticated user's to read (KubeVirt's kubevirt.io:default), and only theirs.
	version := func(cfg *rest.Config) error {
		return kubernetes.NewForConfigOrDie(cfg).Discovery().RESTClient().Get().AbsPath("/apis/subresources.kubevirt.io/v1/version").Do(ctx).Error()
	}
	if err := version(as(f, "dave")); err != nil {
		t.Errorf("an authenticated user with no role reads the version: %v, want 200", err)
	}
	if err := version(anonymous); !apierrors.IsUnauthorized(err) && !apierrors.IsForbidden(err) {
		t.Errorf("unauthenticated version: %v, want 401 or 403", err)
	}
	code, err := subresourceCall(ctx, t, alice, f.Namespace, "nope", "start")
	if code != http.StatusNotFound || err == nil {
		t.Errorf("start of an unknown VM: %d %v, want 404 naming it", code, err)
	} else if want := `virtualmachines.kubevirt.io "nope" not found`; !strings.Contains(err.Error(), want) {
		t.Errorf("start of an unknown VM: %q does not say %q", err, want)
	}
	f.Eventually("alice's stop took effect", 2*time.Minute, func(ctx context.Context) (bool, error) {
		vm := &virtv1.VirtualMachine{}
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: "vm"}, vm); err != nil {
			return false, err
		}
		return vm.Spec.EffectiveRunStrategy() == virtv1.RunStrategyHalted, fmt.Errorf("runStrategy %s", vm.Spec.EffectiveRunStrategy())
	})
}

// The node agent serves its subresources only to virt-api: a request without virt-api's client
// certificate is refused, in plain HTTP or TLS.
func TestNodeAgentRefusesAnyoneButVirtAPI(t *testing.T) {
	f := framework.New(t)
	requireVirtAPI(f)
	ctx := f.Context()
	path := "/v1/namespaces/" + f.Namespace + "/virtualmachineinstances/any/pause"
	for name, c := range map[string]struct {
		scheme string
		client *http.Client
	}{
		"plain HTTP":                {"http", &http.Client{Timeout: 10 * time.Second}},
		"TLS without a certificate": {"https", &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}}, //nolint:gosec // the test plays an attacker
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.scheme+"://"+nodeAgentAddr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 400 {
				t.Errorf("%s: the node agent answered %s", name, resp.Status)
			}
			continue
		}
		t.Logf("%s: refused: %v", name, err)
	}
	// The same call through virt-api reaches the agent (404: no such instance is told apart from a refusal).
	err := f.Clientset.Discovery().RESTClient().Put().
		AbsPath("/apis/subresources.kubevirt.io/v1/namespaces", f.Namespace, "virtualmachineinstances", "any", "pause").
		Body([]byte("{}")).Do(ctx).Error()
	if !apierrors.IsNotFound(err) {
		t.Errorf("pause of an unknown instance through virt-api: want 404, got %v", err)
	}
}
