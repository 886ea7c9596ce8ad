package admission_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/podvirt/podvirt/apiserver/admission"
	"github.com/podvirt/podvirt/controllers/podtemplate"
	"github.com/podvirt/podvirt/internal/testenv"
)

// evictionCalls counts the eviction webhook's calls (countingServer wraps it).
var evictionCalls atomic.Int32

// countingServer counts the calls of the eviction webhook it registers.
type countingServer struct{ webhook.Server }

func (s countingServer) Register(path string, hook http.Handler) {
	if path == admission.PathEvictLauncher {
		inner := hook
		hook = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { evictionCalls.Add(1); inner.ServeHTTP(w, r) })
	}
	s.Server.Register(path, hook)
}

// The eviction webhook sees launcher Pods only (its match condition in install/virt-api/webhooks.yaml):
// a virt-api outage, with the webhook failing closed, must not block the eviction of any other Pod.
func TestEvictionWebhookSeesLauncherPodsOnly(t *testing.T) {
	e := testenv.Require(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	cs := kubernetes.NewForConfigOrDie(e.Config)
	evict := func(name string) {
		t.Helper()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/x"}}}}
		require.NoError(t, e.Client.Create(ctx, pod))
		require.NoError(t, cs.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}))
	}
	before := evictionCalls.Load()
	evict("web-0")
	assert.Equal(t, before, evictionCalls.Load(), "the eviction of an unrelated Pod never reaches virt-api")
	evict(podtemplate.PodNamePrefix + "vm-abcde")
	assert.Equal(t, before+1, evictionCalls.Load(), "a launcher Pod's eviction does")
}
