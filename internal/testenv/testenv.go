// Package testenv runs integration tests against a real kube-apiserver and etcd with Podvirt's
// generated CRDs installed (controller-runtime's envtest).
//
// The binaries come from hack/kube-binaries.sh, which builds them from the Go module proxy and caches
// them by version; `make integration` and `make test` pass their directory in KUBEBUILDER_ASSETS.
// Under `go test -short` the integration tests are skipped; without KUBEBUILDER_ASSETS they fail with
// a message saying how to run them, rather than pass without testing anything.
package testenv

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/scheme"
)

// Env is a running control plane with the CRDs installed.
type Env struct {
	// Config reaches the apiserver as a cluster admin.
	Config *rest.Config
	// Client is a controller-runtime client with the Kubernetes and Podvirt types registered.
	Client client.Client
	// Scheme holds the Kubernetes and Podvirt types.
	Scheme *k8sruntime.Scheme
}

// Scheme returns a scheme with the Kubernetes built-in types and Podvirt's API registered.
func Scheme() *k8sruntime.Scheme { return scheme.New() }

// Run starts the control plane, runs the package's tests, stops the control plane and returns the
// exit code. Call it from TestMain; *env is set before any test runs:
//
//	var env *testenv.Env
//	func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }
//
// With -short it runs the tests without a control plane (*env stays nil); integration tests call
// Require to skip themselves then.
func Run(m *testing.M, env **Env) int { return RunWith(m, env, Options{}) }

// Options are what a package's control plane has beyond the CRDs.
type Options struct {
	// Webhooks, when set, registers admission webhooks on a local webhook server; virt-api's webhook
	// configurations (install/virt-api) are installed pointing at it, so the apiserver calls them.
	Webhooks func(srv webhook.Server, s *k8sruntime.Scheme, c client.Client)
}

// RunWith is Run with options.
func RunWith(m *testing.M, env **Env, opts Options) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "testenv: KUBEBUILDER_ASSETS is not set: run integration tests with `make integration` (or use go test -short for unit tests only)")
		return 1
	}
	te := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot(), "install", "crds")},
		ErrorIfCRDPathMissing: true,
		Scheme:                Scheme(),
	}
	if opts.Webhooks != nil {
		te.WebhookInstallOptions.Paths = []string{filepath.Join(repoRoot(), "install", "virt-api", "webhooks.yaml")}
	}
	cfg, err := te.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: start control plane: %v\n", err)
		_ = te.Stop() // a failed start (e.g. a CRD refused) may leave the apiserver and etcd running
		return 1
	}
	defer func() {
		if err := te.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stop control plane: %v\n", err)
		}
	}()
	stopGC, err := startGarbageCollector(te)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	defer stopGC()
	c, err := client.New(cfg, client.Options{Scheme: te.Scheme})
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: client: %v\n", err)
		return 1
	}
	if opts.Webhooks != nil {
		stop, err := serveWebhooks(te, c, opts.Webhooks)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
			return 1
		}
		defer stop()
	}
	*env = &Env{Config: cfg, Client: c, Scheme: te.Scheme}
	return m.Run()
}

// Require skips the test under -short; otherwise it returns the running environment.
func Require(t testing.TB, env *Env) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs a real apiserver (run without -short)")
	}
	if env == nil {
		t.Fatal("testenv: no control plane: call testenv.Run from TestMain")
	}
	return env
}

// Namespace creates a fresh namespace for one test and deletes it when the test ends.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), ns) })
	return ns.Name
}

// GVK returns the GroupVersionKind of a Podvirt kind in the given version (v1 or v1alpha3).
func GVK(version, kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: virtv1.GroupName, Version: version, Kind: kind}
}

// repoRoot is the module root, found from this file's location so tests work from any package.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// RepoPath joins path elements onto the repository root.
func RepoPath(elem ...string) string {
	return filepath.Join(append([]string{repoRoot()}, elem...)...)
}
