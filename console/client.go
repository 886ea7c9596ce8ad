package console

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	clientws "k8s.io/client-go/transport/websocket"
	"k8s.io/streaming/pkg/httpstream"
)

// DialAPI opens the websocket at path (e.g. /apis/subresources.kubevirt.io/v1/namespaces/NS/
// virtualmachineinstances/NAME/console) on the cluster cfg reaches, with client-go's websocket
// round tripper: the kubeconfig's credentials (exec plugins, tokens, client certificates) and
// proxies apply as for any request, and a refusal comes back as the server's Status error.
func DialAPI(ctx context.Context, cfg *rest.Config, path string) (*websocket.Conn, error) {
	rt, holder, err := clientws.RoundTripperFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("websocket transport: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	ws, err := clientws.Negotiate(rt, holder, req, Subprotocol)
	var upgrade *httpstream.UpgradeFailureError
	if errors.As(err, &upgrade) {
		err = upgrade.Cause // the server's answer (a Status error), not the upgrade's wrapping
	}
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(MaxFrame)
	return ws, nil
}

// RedialInterval is how long a client waits between two tries of a stream that is Retryable.
const RedialInterval = time.Second

// Retryable tells whether a DialAPI failure is one that goes away on its own: the stream's far end
// is moving or restarting (a migration handing the instance over to another node, a node agent or
// virt-api restarting, the apiserver throttling) rather than refusing the caller for good.
func Retryable(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		switch status.Status().Code {
		case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout, http.StatusTooManyRequests:
			return true
		}
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// DialAPIRetrying is DialAPI tried again every RedialInterval while the failure is Retryable, until
// ctx ends (the caller's bound); waiting is told each new reason once, so a user sees what the
// client waits for. Past ctx's end it returns the last failure.
func DialAPIRetrying(ctx context.Context, cfg *rest.Config, path string, waiting func(error)) (*websocket.Conn, error) {
	last := ""
	for {
		ws, err := DialAPI(ctx, cfg, path)
		if err == nil || !Retryable(err) {
			return ws, err
		}
		if msg := err.Error(); msg != last && waiting != nil {
			waiting(err)
			last = msg
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(RedialInterval):
		}
	}
}
