// Package framework is the harness every e2e test uses against a real cluster (the local one from
// `make cluster-up`, or any cluster KUBECONFIG points at): clients, a fresh namespace per test
// deleted at cleanup, waits that always have a timeout, and on failure a dump of the namespace
// (events, logs of every container, YAML of every object).
//
// The e2e test files carry the build tag e2e; this package has none so `go vet ./...` checks it.
package framework

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podvirt/podvirt/internal/localcluster"
	"github.com/podvirt/podvirt/internal/testenv"
)

// Framework is one test's view of the cluster.
type Framework struct {
	t testing.TB
	// Config reaches the apiserver with KUBECONFIG's credentials.
	Config *rest.Config
	// Client is a controller-runtime client with the Kubernetes and Podvirt types.
	Client client.Client
	// Clientset is for what controller-runtime's client does not do (pod logs).
	Clientset kubernetes.Interface
	// Dynamic lists arbitrary resources for the failure dump.
	Dynamic dynamic.Interface
	// Namespace is fresh for this test and deleted when it ends.
	Namespace string
}

// DefaultTimeout bounds the waits that take no explicit timeout.
const DefaultTimeout = 2 * time.Minute

// Kubeconfig returns the kubeconfig the tests use: $KUBECONFIG, else the local cluster's.
func Kubeconfig() string {
	if k := os.Getenv("KUBECONFIG"); k != "" {
		return k
	}
	return localcluster.DefaultConfig().Kubeconfig()
}

// Image returns the name of a locally built image: docker.io/podvirt/NAME:dev.
func Image(name string) string { return "docker.io/podvirt/" + name + ":dev" }

// New connects to the cluster and creates the test's namespace. The namespace is dumped when the
// test fails and deleted (waiting until it is gone) when it ends.
func New(t testing.TB) *Framework {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", Kubeconfig())
	if err != nil {
		t.Fatalf("kubeconfig %s: %v (bring the local cluster up with `make cluster-up`)", Kubeconfig(), err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	f := &Framework{t: t, Config: cfg}
	if f.Client, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()}); err != nil {
		t.Fatalf("client: %v", err)
	}
	if f.Clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatalf("clientset: %v", err)
	}
	if f.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		t.Fatalf("dynamic client: %v", err)
	}
	f.Namespace = namespaceName(t.Name())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.Namespace, Labels: map[string]string{"podvirt.io/e2e": "true"}}}
	if err := f.Client.Create(f.Context(), ns); err != nil {
		t.Fatalf("create namespace %s: %v", f.Namespace, err)
	}
	t.Cleanup(f.cleanup)
	return f
}

// Context is cancelled when the test ends.
func (f *Framework) Context() context.Context { return f.t.Context() }

// T is the test the framework belongs to.
func (f *Framework) T() testing.TB { return f.t }

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// namespaceName is e2e-<test name>-<random>, valid as a DNS label.
func namespaceName(test string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	base := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(test), "-"), "-")
	if len(base) > 45 {
		base = base[:45]
	}
	return "e2e-" + base + "-" + hex.EncodeToString(b)
}

func (f *Framework) cleanup() {
	// The test's context is already cancelled here: cleanup gets its own, bounded one.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if f.t.Failed() {
		f.Dump(ctx)
	}
	if os.Getenv("E2E_KEEP_NAMESPACE") != "" {
		f.t.Logf("E2E_KEEP_NAMESPACE set: keeping namespace %s", f.Namespace)
		return
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.Namespace}}
	if err := f.Client.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
		f.t.Errorf("delete namespace %s: %v", f.Namespace, err)
		return
	}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := f.Client.Get(ctx, client.ObjectKeyFromObject(ns), ns)
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		f.t.Errorf("namespace %s not deleted within 2m: %v", f.Namespace, err)
	}
}

// Eventually polls cond every 250ms until it returns true, and fails the test when timeout passes
// first, with what and the last error cond returned. cond's error does not stop the polling: it
// describes what was observed (and is ignored once cond returns true).
func (f *Framework) Eventually(what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	f.t.Helper()
	if err := f.Poll(timeout, cond); err != nil {
		f.t.Fatalf("%s: %v", what, err)
	}
}

// Poll is Eventually without failing the test: it returns an error after timeout.
func (f *Framework) Poll(timeout time.Duration, cond func(ctx context.Context) (bool, error)) error {
	var last error
	err := wait.PollUntilContextTimeout(f.Context(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		// Each observation gets its own deadline, so the last one reports what it saw rather
		// than the poll's expiry.
		ctx, cancel := context.WithTimeout(f.Context(), 30*time.Second)
		defer cancel()
		ok, err := cond(ctx)
		if ok {
			return true, nil
		}
		if err != nil {
			last = err
		}
		return false, nil
	})
	if err != nil {
		if last != nil {
			return fmt.Errorf("not within %s: %w (last: %v)", timeout, err, last)
		}
		return fmt.Errorf("not within %s: %w", timeout, err)
	}
	return nil
}

// Create creates obj in the test's namespace (when it has none) and fails the test on error.
func (f *Framework) Create(obj client.Object) {
	f.t.Helper()
	if obj.GetNamespace() == "" {
		obj.SetNamespace(f.Namespace)
	}
	if err := f.Client.Create(f.Context(), obj); err != nil {
		f.t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}
