package apiserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	"github.com/podvirt/podvirt/internal/scheme"
)

// A launcher's token gets its own node's kubelet lease, nothing else; every other caller is refused
// naming what is wrong, and a flood of new tokens is bounded.
func TestKubeletLease(t *testing.T) {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: "n1"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("n1"), RenewTime: ptr.To(metav1.NewMicroTime(time.Date(2026, 11, 28, 1, 2, 3, 0, time.UTC)))}}
	reviews := 0
	// The kube-apiserver's TokenReview as it answers: tokens whose subject starts with "good" are
	// launchers' on node n1, "nopod" one not bound to a Pod, others forged.
	review := func(_ context.Context, _ client.WithWatch, o client.Object, _ ...client.CreateOption) error {
		reviews++
		tr := o.(*authenticationv1.TokenReview)
		assert.Equal(t, []string{launcherv1.KubeletLeaseAudience}, tr.Spec.Audiences)
		extra := map[string]authenticationv1.ExtraValue{serviceaccount.PodNameKey: {"virt-launcher-x"}, serviceaccount.PodUIDKey: {"uid-1"}, serviceaccount.NodeNameKey: {"n1"}}
		sub := subject(t, tr.Spec.Token)
		switch {
		case strings.HasPrefix(sub, "good"):
		case sub == "nopod":
			extra = map[string]authenticationv1.ExtraValue{}
		default:
			return nil // not authenticated
		}
		tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: tr.Spec.Audiences,
			User: authenticationv1.UserInfo{Username: "system:serviceaccount:ns:default", Extra: extra}}
		return nil
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(lease).
		WithInterceptorFuncs(interceptor.Funcs{Create: review}).Build()
	k := &KubeletLease{Client: c}
	call := func(method, body string) (*httptest.ResponseRecorder, launcherv1.KubeletLeaseResponse) {
		w := httptest.NewRecorder()
		k.ServeHTTP(w, httptest.NewRequest(method, launcherv1.KubeletLeasePath, strings.NewReader(body)))
		var out launcherv1.KubeletLeaseResponse
		if w.Code == http.StatusOK {
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &out))
		}
		return w, out
	}

	body := func(sub, aud string, exp time.Time) string { return `{"token":"` + jwt(sub, aud, exp) + `"}` }
	soon := time.Now().Add(time.Hour)
	good := body("good-1", launcherv1.KubeletLeaseAudience, soon)
	w, out := call(http.MethodPost, good)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, launcherv1.KubeletLeaseResponse{Node: "n1", Renewal: heartbeatv1.Renewal(lease)}, out)
	k.perPod.Remove("uid-1")
	_, _ = call(http.MethodPost, good)
	assert.Equal(t, 1, reviews, "a reviewed token is remembered")

	for _, tc := range []struct{ name, method, body, want string }{
		{"not a POST", http.MethodGet, "", "not supported"},
		{"no token", http.MethodPost, `{}`, "token"},
		{"unknown field", http.MethodPost, `{"token":"x.y.z","node":"n2"}`, "token"},
		{"oversized body", http.MethodPost, `{"token":"` + strings.Repeat("a", launcherv1.MaxKubeletLeaseBody) + `"}`, "at most 16384 bytes"},
		{"not a JWT", http.MethodPost, `{"token":"garbage"}`, "not a JWT"},
		{"another audience", http.MethodPost, body("good-2", "https://kubernetes.default.svc", soon), "not for audience"},
		{"expired", http.MethodPost, body("good-2", launcherv1.KubeletLeaseAudience, time.Now().Add(-time.Minute)), "expired"},
		{"not authenticated", http.MethodPost, body("forged", launcherv1.KubeletLeaseAudience, soon), "not authenticated"},
		{"not bound to a Pod", http.MethodPost, body("nopod", launcherv1.KubeletLeaseAudience, soon), "not bound to a Pod"},
	} {
		w, _ := call(tc.method, tc.body)
		assert.GreaterOrEqual(t, w.Code, 400, tc.name)
		assert.Contains(t, w.Body.String(), tc.want, tc.name)
	}
	assert.Equal(t, 3, reviews, "tokens that cannot be for the audience are refused without a review")

	// One Pod calling more than once a second (beyond a small burst) is refused.
	k.perPod.Remove("uid-1")
	codes := map[int]int{}
	for range callsPodBurst + 2 {
		w, _ := call(http.MethodPost, good)
		codes[w.Code]++
	}
	assert.Equal(t, map[int]int{http.StatusOK: callsPodBurst, http.StatusTooManyRequests: 2}, codes)

	// A node without a lease answers "" (the launcher counts that as no sign of life).
	require.NoError(t, c.Delete(context.Background(), lease))
	k.perPod.Remove("uid-1")
	w, out = call(http.MethodPost, good)
	require.Equal(t, http.StatusOK, w.Code)
	assert.Empty(t, out.Renewal)

	// New tokens from one address beyond its review rate are refused with 429, naming the bound.
	limited := 0
	for i := range 3 * reviewsAddressBurst {
		w, _ := call(http.MethodPost, body(fmt.Sprintf("good-flood-%d", i), launcherv1.KubeletLeaseAudience, soon))
		if w.Code == http.StatusTooManyRequests && strings.Contains(w.Body.String(), "new tokens a second from one address") {
			limited++
		}
	}
	assert.Positive(t, limited)
}

// jwt is an unsigned token with the claims the endpoint reads before a review.
func jwt(sub, aud string, exp time.Time) string {
	claims, _ := json.Marshal(map[string]any{"sub": sub, "aud": []string{aud}, "exp": exp.Unix()})
	return "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString(claims) + ".c2ln"
}

// subject is a jwt's sub.
func subject(t *testing.T, token string) string {
	raw, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[1])
	require.NoError(t, err)
	var claims struct{ Sub string }
	require.NoError(t, json.Unmarshal(raw, &claims))
	return claims.Sub
}
