package clusterconfig

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"time"

	certutil "k8s.io/client-go/util/cert"
	ctrl "sigs.k8s.io/controller-runtime"
)

// HealthzPath is where each component says which version of the configuration it has seen, as
// KubeVirt's components do on their port 8443: {"config-resource-version": "<the KubeVirt
// object's resourceVersion>"}. KubeVirt's tools wait for every component to report at least the
// version they wrote before they rely on a change.
const HealthzPath = "/healthz"

// HealthzPort is the port KubeVirt's tools call.
const HealthzPort = 8443

// healthzTimeout bounds one answer (a read from the cache).
const healthzTimeout = 5 * time.Second

// Healthz answers GET HealthzPath with the configuration src reads.
func Healthz(src *Source) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "only GET", http.StatusMethodNotAllowed)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), healthzTimeout)
		defer cancel()
		s, err := src.Read(ctx)
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "cannot read the cluster configuration"})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"apiserver": "ok", "config-resource-version": s.ResourceVersion})
	})
}

// HealthzServer serves Healthz over HTTPS on Addr with a self-signed certificate made at start
// (KubeVirt's tools do not verify it; nothing else is served there). It runs on every replica.
// Addr should be the loopback (DefaultHealthzAddr): KubeVirt's tools reach it through a
// port-forward, and nobody else needs it. An address that is taken is logged and the component
// runs on without it: a status report never takes a component down.
type HealthzServer struct {
	Addr   string
	Source *Source
}

// DefaultHealthzAddr is the loopback at HealthzPort: reached by `kubectl port-forward`, by no Pod.
var DefaultHealthzAddr = fmt.Sprintf("127.0.0.1:%d", HealthzPort)

// NeedLeaderElection is false: every replica reports what it has seen.
func (h *HealthzServer) NeedLeaderElection() bool { return false }

// Start serves until ctx ends.
func (h *HealthzServer) Start(ctx context.Context) error {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("podvirt-healthz", nil, nil)
	if err != nil {
		return fmt.Errorf("healthz certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("healthz certificate: %w", err)
	}
	log := ctrl.Log.WithName("healthz")
	ln, err := net.Listen("tcp", h.Addr)
	if err != nil {
		log.Error(err, "Not reporting the configuration version: the address is not available", "address", h.Addr)
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle(HealthzPath, Healthz(h.Source))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: healthzTimeout, ReadTimeout: healthzTimeout, WriteTimeout: 2 * healthzTimeout,
		IdleTimeout: healthzTimeout, MaxHeaderBytes: 16 << 10, ErrorLog: stdlog.New(io.Discard, "", 0), // no log line per bad handshake
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	log.Info("Reporting the configuration version seen", "address", ln.Addr().String(), "path", HealthzPath)
	select {
	case err := <-done:
		return fmt.Errorf("healthz: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), healthzTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		_ = srv.Close() // connections still open past the timeout
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("healthz: %w", err)
	}
	return nil
}
