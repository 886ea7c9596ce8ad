package launcher

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	"github.com/podvirt/podvirt/internal/boottime"
)

// The check asks virt-api with the projected token over TLS verified against the CA the agent gave,
// and refuses what it cannot trust: another CA, an answer too long, a node without a lease.
func TestKubeletCheckAsks(t *testing.T) {
	renewal := "n1@2026-11-28T01:02:03Z"
	var gotToken string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, launcherv1.KubeletLeasePath, r.URL.Path)
		var req launcherv1.KubeletLeaseRequest
		require.NoError(t, json.NewDecoder(r.Body).Decode(&req))
		gotToken = req.Token
		switch renewal {
		case "long":
			_, _ = io.WriteString(w, strings.Repeat(" ", launcherv1.MaxKubeletLeaseBody+1))
		default:
			_ = json.NewEncoder(w).Encode(launcherv1.KubeletLeaseResponse{Node: "n1", Renewal: renewal})
		}
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, launcherv1.KubeletTokenFile), []byte("tok\n"), 0o600))
	k := newKubeletCheck(&Config{KubeletTokenDir: dir, Log: slog.New(slog.DiscardHandler)}, func() time.Duration { return time.Minute })
	ctx := context.Background()

	_, err := k.ask(ctx)
	require.ErrorIs(t, err, errNotConfigured)
	assert.ErrorContains(t, k.configure(&launcherv1.NodeCheck{URL: "http://" + srv.Listener.Addr().String(), CA: ca}), "not an https URL")
	assert.ErrorContains(t, k.configure(&launcherv1.NodeCheck{URL: srv.URL, CA: []byte("junk")}), "holds no certificate")
	assert.Empty(t, k.configured())

	require.NoError(t, k.configure(&launcherv1.NodeCheck{URL: srv.URL, CA: ca}))
	assert.NotEmpty(t, k.configured())
	got, err := k.ask(ctx)
	require.NoError(t, err)
	assert.Equal(t, "n1@2026-11-28T01:02:03Z", got)
	assert.Equal(t, "tok", gotToken)

	renewal = ""
	_, err = k.ask(ctx)
	assert.ErrorContains(t, err, "has no kubelet lease")
	renewal = "long"
	_, err = k.ask(ctx)
	assert.ErrorContains(t, err, "longer than")

	// A server whose certificate does not chain to the CA given is not trusted.
	require.NoError(t, k.configure(&launcherv1.NodeCheck{URL: srv.URL, CA: otherCA(t)}))
	_, err = k.ask(ctx)
	assert.ErrorContains(t, err, "certificate")
}

// otherCA is a self-signed CA certificate (PEM) that signed nothing.
func otherCA(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other"}, IsCA: true,
		BasicConstraintsValid: true, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// Only the node agent (root) names where the check asks: anyone else in the Pod is refused.
func TestNodeCheckOnlyFromTheAgent(t *testing.T) {
	g := newGuest(&Config{Log: slog.New(slog.DiscardHandler)}, nil)
	w := httptest.NewRecorder()
	body := `{"url":"https://evil.example","ca":""}`
	newHandler(g).ServeHTTP(w, httptest.NewRequest(http.MethodPut, launcherv1.PathNodeCheck, strings.NewReader(body)))
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Empty(t, g.kubelet.configured())
}

// A request the agent sent while it vouched until some time counts as heard no later than that time,
// however late it is served (a node that froze and thawed); from anyone but root it counts not at all.
func TestHeardNoLaterThanVouched(t *testing.T) {
	g := newGuest(&Config{Log: slog.New(slog.DiscardHandler)}, nil)
	h := g.heard(http.NotFoundHandler())
	g.lastHeard.Store(int64(boottime.Now() - time.Minute))
	before := g.lastHeard.Load()
	path := launcherv1.PathStatus
	call := func(root bool, until time.Duration) {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		if root {
			r = r.WithContext(context.WithValue(r.Context(), peerUIDKey{}, uint32(0)))
		}
		if until > 0 {
			r.Header.Set(launcherv1.HeaderVouchedUntil, strconv.FormatInt(int64(until), 10))
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	call(false, 0)
	assert.Equal(t, before, g.lastHeard.Load(), "not the agent")
	past := time.Duration(before) + time.Second
	call(true, past)
	assert.Equal(t, int64(past), g.lastHeard.Load(), "clamped to the vouch's end")
	call(true, time.Duration(before)-time.Hour)
	assert.Equal(t, int64(past), g.lastHeard.Load(), "never moved back")
	call(true, 0)
	assert.Greater(t, g.lastHeard.Load(), int64(past), "no bound: now")

	// A sync's end too, however long it was served: a node that froze during a sync and thawed
	// is not heard at the thaw (the agent vouches during a sync with status requests of its own).
	g.lastHeard.Store(before)
	path = launcherv1.PathSync
	call(true, past)
	assert.Equal(t, int64(past), g.lastHeard.Load(), "the end of a sync, clamped to its vouch")
}

// A request from the agent heard once its guest's fence fell due — the loop busy with a sync, or a
// thawed node's agent quicker than the loop's next poll — does not lift the fence; before a guest
// was started, or with the kubelet known alive, nothing is latched.
func TestALateRequestDoesNotLiftADueFence(t *testing.T) {
	const limit = 40 * time.Second
	for name, tc := range map[string]struct {
		started, kubeletAlive, latched bool
	}{
		"guest running, kubelet unknown":   {started: true, latched: true},
		"no guest yet":                     {},
		"guest running, kubelet seen just": {started: true, kubeletAlive: true},
	} {
		t.Run(name, func(t *testing.T) {
			g := newGuest(&Config{Log: slog.New(slog.DiscardHandler), FenceAfter: limit}, nil)
			h := g.heard(http.NotFoundHandler())
			g.started.Store(tc.started)
			g.lastHeard.Store(int64(boottime.Now() - 2*limit))
			if tc.kubeletAlive {
				g.kubelet.alive.Store(int64(boottime.Now()))
			}
			r := httptest.NewRequest(http.MethodGet, launcherv1.PathStatus, nil)
			r = r.WithContext(context.WithValue(r.Context(), peerUIDKey{}, uint32(0)))
			h.ServeHTTP(httptest.NewRecorder(), r)
			assert.Less(t, g.agentSilent(), time.Second, "heard")
			assert.Equal(t, tc.latched, g.kubelet.fenceDue(g.agentSilent()), "the fence still due")
		})
	}
}
