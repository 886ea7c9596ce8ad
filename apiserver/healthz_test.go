package apiserver

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

// GET /healthz is the configuration's report; every other request, /healthz's subpaths and other
// methods included, goes through the server's filters.
func TestWithHealthz(t *testing.T) {
	h := withHealthz(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("server")) }),
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("config")) }))
	for _, tc := range []struct{ method, path, want string }{
		{http.MethodGet, "/healthz", "config"},
		{http.MethodGet, "//healthz", "config"}, // as KubeVirt's tools ask
		{http.MethodGet, "/healthz/ping", "server"},
		{http.MethodPost, "/healthz", "server"},
		{http.MethodGet, "/readyz", "server"},
		{http.MethodGet, "/apis/subresources.kubevirt.io/v1", "server"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		assert.Equal(t, tc.want, rec.Body.String(), "%s %s", tc.method, tc.path)
	}
}
