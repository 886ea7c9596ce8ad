package clusterconfig

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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

// The server answers over TLS (KubeVirt's tools ask for "//healthz"), and stops when its context
// ends; an address already taken leaves the component running without it.
func TestHealthzServer(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	assert.NoError(t, (&HealthzServer{Addr: taken.Addr().String()}).Start(t.Context()), "a taken address is not an error")

	free, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := free.Addr().String()
	require.NoError(t, free.Close())
	c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- (&HealthzServer{Addr: addr, Source: &Source{Reader: c, Namespace: "podvirt"}}).Start(ctx)
	}()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a self-signed certificate, as KubeVirt's tools accept it
	var body []byte
	require.Eventually(t, func() bool {
		resp, err := hc.Get("https://" + addr + "//healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 50*time.Millisecond)
	assert.JSONEq(t, `{"apiserver":"ok","config-resource-version":""}`, string(body))
	cancel()
	assert.NoError(t, <-done)
}
