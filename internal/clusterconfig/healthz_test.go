package clusterconfig

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/scheme"
)

// Healthz reports the resourceVersion of the KubeVirt object it reads ("" without one), as
// KubeVirt's tools expect from every component.
func TestHealthzReportsTheVersionSeen(t *testing.T) {
	for _, tc := range []struct {
		objects []client.Object
		want    string
	}{
		{nil, ""},
		{[]client.Object{kubeVirt(virtv1.KubeVirtConfiguration{})}, ""}, // want: set below from the object
	} {
		c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc.objects...).Build()
		if len(tc.objects) > 0 { // the fake tracker sets its own versions: read what it holds
			kv := &virtv1.KubeVirt{}
			require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(tc.objects[0]), kv))
			tc.want = kv.ResourceVersion
		}
		rec := httptest.NewRecorder()
		Healthz(&Source{Reader: c, Namespace: "podvirt", Base: Defaults()}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, HealthzPath, nil))
		assert.Equal(t, http.StatusOK, rec.Code)
		var body map[string]string
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		assert.Equal(t, tc.want, body["config-resource-version"])
	}
	rec := httptest.NewRecorder()
	Healthz(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, HealthzPath, nil))
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}

// The server starts, and stops when its context ends.
func TestHealthzServerStops(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- (&HealthzServer{Addr: "127.0.0.1:0"}).Start(ctx) }()
	cancel()
	assert.NoError(t, <-done)
}
