package nodeagent

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func selfSignedTLS(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
}

// Connections that never finish their TLS handshake, from one address, take at most
// MaxHandshakesPerAddress slots; a caller from another address still gets through at once.
func TestHandshakesFromOneAddressAreBounded(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := listenTLS(raw, selfSignedTLS(t))
	served := make(chan struct{})
	defer func() { _ = l.Close(); l.Wait(); <-served }()
	go func() { // the server: accept and answer one byte
		defer close(served)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("!"))
			_ = c.Close()
		}
	}()

	attacker := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	var silent []net.Conn
	for range 3 * MaxHandshakesPerAddress {
		c, err := attacker.Dial("tcp", raw.Addr().String())
		require.NoError(t, err)
		silent = append(silent, c)
	}
	defer func() {
		for _, c := range silent {
			_ = c.Close()
		}
	}()
	// The listener closes the attacker's connections beyond its bound: they read EOF at once.
	closed := 0
	for _, c := range silent {
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
			closed++
		}
	}
	assert.Equal(t, 2*MaxHandshakesPerAddress, closed, "connections past the bound are closed at once")

	c, err := tls.Dial("tcp", raw.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test's own certificate
	require.NoError(t, err, "another address is served while one address holds its handshake slots")
	buf := make([]byte, 1)
	_, err = c.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "!", string(buf))
	_ = c.Close()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
