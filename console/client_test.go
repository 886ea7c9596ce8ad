package console

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

func TestRetryable(t *testing.T) {
	gr := schema.GroupResource{Group: "kubevirt.io", Resource: "virtualmachineinstances"}
	refused := &url.Error{Op: "Get", URL: "https://x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"503 (the agent's socket is gone mid hand-over)", apierrors.NewServiceUnavailable("node agent on vm-2: serial0.sock: no such file"), true},
		{"502", apierrors.NewGenericServerResponse(http.StatusBadGateway, "get", gr, "vm", "", 0, false), true},
		{"504", apierrors.NewTimeoutError("slow", 1), true},
		{"429", apierrors.NewTooManyRequests("busy", 1), true},
		{"wrapped 503", fmt.Errorf("dial: %w", apierrors.NewServiceUnavailable("x")), true},
		{"connection refused (virt-api restarting)", refused, true},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"403 stays refused", apierrors.NewForbidden(gr, "vm", errors.New("no")), false},
		{"404 stays refused", apierrors.NewNotFound(gr, "vm"), false},
		{"409 stays refused", apierrors.NewConflict(gr, "vm", errors.New("not running")), false},
		{"400 stays refused", apierrors.NewBadRequest("port"), false},
		{"any other error", errors.New("x509: unknown authority"), false},
	} {
		assert.Equal(t, tc.want, Retryable(tc.err), tc.name)
	}
}

// flaky answers the first refusals requests with 503 (a Status, as virt-api does), then upgrades
// and sends "up".
func flaky(t *testing.T, refusals int32) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= refusals {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable","code":503,`+
				`"message":"node agent on vm-2: the guest's serial console does not answer"}`)
			return
		}
		ws, err := Upgrade(w, r)
		if err != nil {
			return
		}
		defer ws.Close()
		_ = ws.WriteMessage(websocket.BinaryMessage, []byte("up"))
		_, _, _ = ws.ReadMessage()
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func TestDialAPIRetryingRidesOutAHandOver(t *testing.T) {
	srv, calls := flaky(t, 2)
	var waited []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, err := DialAPIRetrying(ctx, &rest.Config{Host: srv.URL}, "/console", func(err error) { waited = append(waited, err.Error()) })
	require.NoError(t, err)
	defer ws.Close()
	_, data, err := ws.ReadMessage()
	require.NoError(t, err)
	assert.Equal(t, "up", string(data))
	assert.EqualValues(t, 3, calls.Load(), "two refusals, then the stream")
	require.Len(t, waited, 1, "the same reason is told once")
	assert.Contains(t, waited[0], "serial console does not answer")
}

func TestDialAPIRetryingStopsAtItsBound(t *testing.T) {
	srv, _ := flaky(t, 1000)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err := DialAPIRetrying(ctx, &rest.Config{Host: srv.URL}, "/console", nil)
	require.Error(t, err)
	assert.True(t, apierrors.IsServiceUnavailable(err), "the last refusal comes back: %v", err)
}

func TestDialAPIRetryingGivesUpOnARefusal(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"no"}`)
	}))
	defer srv.Close()
	_, err := DialAPIRetrying(context.Background(), &rest.Config{Host: srv.URL}, "/console", nil)
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.EqualValues(t, 1, calls.Load(), "a refusal is not tried again")
}
