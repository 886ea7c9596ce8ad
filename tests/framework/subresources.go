package framework

import (
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/rest"
)

// DialSubresource opens the websocket subresource path (below /apis/subresources.kubevirt.io/v1:
// console, vnc, portforward) through host (the kube-apiserver, f.Config.Host, or a proxy in front
// of it) with the test's credentials, as any KubeVirt client would: a plain gorilla client with
// subprotocol plain.kubevirt.io, not the project's own code.
func (f *Framework) DialSubresource(host, path string) (*websocket.Conn, *http.Response, error) {
	return f.DialSubresourceAs(f.Config, host, path)
}

// DialSubresourceAs is DialSubresource with cfg's credentials and impersonation (a user of an
// RBAC test).
func (f *Framework) DialSubresourceAs(cfg *rest.Config, host, path string) (*websocket.Conn, *http.Response, error) {
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, nil, err
	}
	if host != f.Config.Host { // a proxy: the certificate still names the kube-apiserver
		tlsCfg.ServerName = strings.Split(strings.TrimPrefix(f.Config.Host, "https://"), ":")[0]
	}
	header := http.Header{}
	if cfg.BearerToken != "" {
		header.Set("Authorization", "Bearer "+cfg.BearerToken)
	}
	if user := cfg.Impersonate.UserName; user != "" {
		header.Set("Impersonate-User", user)
		for _, g := range cfg.Impersonate.Groups {
			header.Add("Impersonate-Group", g)
		}
	}
	d := websocket.Dialer{TLSClientConfig: tlsCfg, Subprotocols: []string{"plain.kubevirt.io"}, HandshakeTimeout: 30 * time.Second}
	url := strings.Replace(host, "https://", "wss://", 1) + "/apis/subresources.kubevirt.io/v1" + path
	return d.DialContext(f.Context(), url, header)
}
