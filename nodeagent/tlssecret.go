package nodeagent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
)

// SecretTLS serves the subresource server's mutual TLS from a Secret that virt-api keeps (tls.crt,
// tls.key and the ca.crt that signed it and virt-api's client certificate): only a client holding a
// certificate of that CA, i.e. virt-api, is served. It reloads the Secret every Refresh, so a
// rotated certificate is used without a restart.
type SecretTLS struct {
	// Reader reads the Secret (uncached: the agent may read only this one Secret).
	Reader client.Reader
	Secret types.NamespacedName
	// Refresh is how often the Secret is read again once loaded.
	Refresh time.Duration

	mu      sync.RWMutex
	current *tls.Config
}

// NeedLeaderElection is false: every node agent serves its own node.
func (s *SecretTLS) NeedLeaderElection() bool { return false }

// Start loads the Secret at once and then every Refresh (every 5 s until the first success).
func (s *SecretTLS) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("subresource-tls").WithValues("secret", s.Secret.String())
	for {
		wait := s.Refresh
		if err := s.load(ctx); err != nil {
			logger.Error(err, "Loading the subresource server's certificate; calls from virt-api fail until it loads")
			if s.config() == nil {
				wait = 5 * time.Second
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

func (s *SecretTLS) load(ctx context.Context) error {
	sec := &corev1.Secret{}
	if err := s.Reader.Get(ctx, s.Secret, sec); err != nil {
		return fmt.Errorf("read secret %s: %w", s.Secret, err)
	}
	cert, pool, err := agentv1.KeyPair(sec.Data)
	if err != nil {
		return fmt.Errorf("secret %s: %w", s.Secret, err)
	}
	s.mu.Lock()
	s.current = &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}
	s.mu.Unlock()
	return nil
}

func (s *SecretTLS) config() *tls.Config {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.current
}

// PeerConfig is the client side towards another node's agent (a live migration's streams): the
// agents' own certificate (good for clients too) and the CA, the server named agentv1.ServerName(namespace).
func (s *SecretTLS) PeerConfig() (*tls.Config, error) {
	c := s.config()
	if c == nil {
		return nil, errors.New("no node agent certificate loaded yet")
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: c.Certificates, RootCAs: c.ClientCAs, ServerName: agentv1.ServerName(s.Secret.Namespace)}, nil
}

// TLSConfig is the server side: each handshake uses the certificate and CA loaded last.
func (s *SecretTLS) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			if c := s.config(); c != nil {
				return c, nil
			}
			return nil, errors.New("no serving certificate loaded yet")
		},
	}
}
