package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gorilla/websocket"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	clientws "k8s.io/client-go/transport/websocket"
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
	return ws, nil
}
