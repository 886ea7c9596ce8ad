package apiserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/console"
)

// Agents calls the node agent of an instance's node over mutual TLS: virt-api's client
// certificate and the node CA are the files CertFiles mirrors into CertDir from the node CA's
// Secret. Only the agent of the instance's node is accepted (agentv1.ClientConfig): it is reached by
// node IP, and its certificate must name that node.
type Agents struct {
	Client  client.Client
	CertDir string
	Port    int
}

// errNoAgents answers the calls of a server without node agents (nil *Agents).
var errNoAgents = apierrors.NewServiceUnavailable("node agents are not reachable from this server")

// tlsConfig reads the current certificate files (calls are rare; a rotated certificate is used at
// the next call) for a call to node's agent.
func (a *Agents) tlsConfig(node string) (*tls.Config, error) {
	data := map[string][]byte{}
	for _, name := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey, agentv1.CACertKey} {
		b, err := os.ReadFile(filepath.Join(a.CertDir, name)) // virt-api's own files (certfiles)
		if err != nil {
			return nil, fmt.Errorf("node agent client certificate: %w", err)
		}
		data[name] = b
	}
	cert, pool, err := agentv1.KeyPair(data)
	if err != nil {
		return nil, fmt.Errorf("node agent client certificate: %w", err)
	}
	return agentv1.ClientConfig(&cert, pool, node), nil
}

// address is host:port of the agent on node.
func (a *Agents) address(ctx context.Context, nodeName string) (string, error) {
	node := &corev1.Node{}
	if err := a.Client.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		return "", fmt.Errorf("find the node agent of node %s: %w", nodeName, err)
	}
	for _, addr := range node.Status.Addresses {
		if addr.Type == corev1.NodeInternalIP {
			return net.JoinHostPort(addr.Address, strconv.Itoa(a.Port)), nil
		}
	}
	return "", apierrors.NewServiceUnavailable(fmt.Sprintf("node %s has no InternalIP to reach its node agent at", nodeName))
}

// Put calls path on the agent of vmi's node and turns its answer into an API error (nil on 2xx).
func (a *Agents) Put(ctx context.Context, vmi *virtv1.VirtualMachineInstance, path string) error {
	return a.Call(ctx, vmi, http.MethodPut, path, nil, nil, agentCallTimeout)
}

// agentCallTimeout bounds a call to a node agent that does not wait on the guest for long.
const agentCallTimeout = 30 * time.Second

// maxAgentReply bounds an agent's answer (an exec's output is the largest).
const maxAgentReply = 2 << 20

// Call sends in (JSON; nil: no body) to path on the agent of vmi's node with method, decodes a 2xx
// answer into out (nil: ignored) and turns any other answer into an API error; the whole call takes
// at most timeout.
func (a *Agents) Call(ctx context.Context, vmi *virtv1.VirtualMachineInstance, method, path string, in, out any, timeout time.Duration) error {
	if a == nil {
		return errNoAgents
	}
	addr, err := a.address(ctx, vmi.Status.NodeName)
	if err != nil {
		return err
	}
	cfg, err := a.tlsConfig(vmi.Status.NodeName)
	if err != nil {
		return apierrors.NewServiceUnavailable(err.Error())
	}
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: cfg}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, method, "https://"+addr+path, body)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("node agent on %s unreachable: %v", vmi.Status.NodeName, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return agentError(vmi, resp)
	}
	if out == nil {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAgentReply+1))
	switch {
	case err != nil:
		return apierrors.NewServiceUnavailable(fmt.Sprintf("node agent on %s: read the answer: %v", vmi.Status.NodeName, err))
	case len(data) > maxAgentReply:
		return apierrors.NewServiceUnavailable(fmt.Sprintf("node agent on %s: the answer is longer than %d bytes", vmi.Status.NodeName, maxAgentReply))
	}
	if err := json.Unmarshal(data, out); err != nil {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("node agent on %s: malformed answer: %v", vmi.Status.NodeName, err))
	}
	return nil
}

// agentError turns a node agent's error answer into an API error naming the instance.
func agentError(vmi *virtv1.VirtualMachineInstance, resp *http.Response) error {
	var body struct{ Message string }
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if json.Unmarshal(data, &body) != nil || body.Message == "" {
		body.Message = string(data)
	}
	gr := schema.GroupResource{Group: virtv1.GroupName, Resource: "virtualmachineinstances"}
	switch resp.StatusCode {
	case http.StatusConflict:
		return apierrors.NewConflict(gr, vmi.Name, fmt.Errorf("%s", body.Message))
	case http.StatusTooManyRequests:
		return apierrors.NewTooManyRequests(fmt.Sprintf("virtualmachineinstance %s: %s", vmi.Name, body.Message), 1)
	case http.StatusNotFound: // virt-api has just read the instance: the agent's view is behind (a hand-over)
		return apierrors.NewServiceUnavailable(fmt.Sprintf("virtualmachineinstance %s is not yet known to the node agent on %s: %s", vmi.Name, vmi.Status.NodeName, body.Message))
	case http.StatusBadRequest:
		return apierrors.NewBadRequest(fmt.Sprintf("virtualmachineinstance %s: %s", vmi.Name, body.Message))
	case http.StatusBadGateway:
		return apierrors.NewServiceUnavailable(fmt.Sprintf("virtualmachineinstance %s: %s", vmi.Name, body.Message))
	case http.StatusGatewayTimeout:
		return apierrors.NewTimeoutError(fmt.Sprintf("virtualmachineinstance %s: %s", vmi.Name, body.Message), 0)
	case http.StatusRequestEntityTooLarge:
		return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("virtualmachineinstance %s: %s", vmi.Name, body.Message))
	default:
		return apierrors.NewServiceUnavailable(fmt.Sprintf("node agent on %s: %s: %s", vmi.Status.NodeName, resp.Status, body.Message))
	}
}

// Dial opens a websocket to path on the agent of vmi's node (console, VNC, port-forward).
func (a *Agents) Dial(ctx context.Context, vmi *virtv1.VirtualMachineInstance, path string) (*websocket.Conn, error) {
	if a == nil {
		return nil, errNoAgents
	}
	addr, err := a.address(ctx, vmi.Status.NodeName)
	if err != nil {
		return nil, err
	}
	cfg, err := a.tlsConfig(vmi.Status.NodeName)
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(err.Error())
	}
	d := console.Dialer()
	d.TLSClientConfig = cfg
	ws, resp, err := d.DialContext(ctx, "wss://"+addr+path, nil)
	if err == nil {
		return ws, nil
	}
	if resp == nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("node agent on %s unreachable: %v", vmi.Status.NodeName, err))
	}
	defer resp.Body.Close()
	return nil, agentError(vmi, resp)
}
