package apiserver

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
)

// FuzzReadBody: whatever body a client sends a subresource, readBody either decodes it or refuses it
// as a 400 or 413 Status naming why; it never panics and never reads past its bound. Run with
// -short: the package's integration tests need a control plane.
func FuzzReadBody(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"dryRun":["All"]}`, `{"gracePeriod":0}`, `{"startPaused":true}`, `{"addedNodeSelector":{"a":"b"}}`,
		`{"unknown":1}`, `[1,2]`, `{"dryRun":"All"}`, `{"gracePeriod":-9223372036854775808}`,
	} {
		f.Add([]byte(s))
	}
	options := []func() any{
		func() any { return &subv1.StartOptions{} }, func() any { return &subv1.StopOptions{} },
		func() any { return &subv1.RestartOptions{} }, func() any { return &subv1.PauseOptions{} },
		func() any { return &subv1.UnpauseOptions{} }, func() any { return &subv1.MigrateOptions{} },
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, newOpts := range options {
			r := httptest.NewRequest(http.MethodPut, "/", bytes.NewReader(body))
			err := readBody(r, newOpts())
			if err == nil {
				continue
			}
			var se apierrors.APIStatus
			if !errors.As(err, &se) {
				t.Fatalf("not a Status: %v", err)
			}
			if code := se.Status().Code; code != http.StatusBadRequest && code != http.StatusRequestEntityTooLarge {
				t.Fatalf("status %d for a bad body: %v", code, err)
			}
			if len(body) > maxBody && se.Status().Code != http.StatusRequestEntityTooLarge {
				t.Fatalf("a body of %d bytes was not refused as too large: %v", len(body), err)
			}
		}
	})
}
