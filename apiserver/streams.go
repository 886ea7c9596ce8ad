package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/gorilla/websocket"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/console"
)

// errShuttingDown is the close reason streams get when virt-api stops.
var errShuttingDown = errors.New("virt-api is shutting down; reconnect to reach another replica")

// portForward checks the port and protocol (KubeVirt's path: portforward/{port}[/{protocol}]) and
// streams one TCP connection to the guest's port, declared in the instance's interfaces or not.
func (h *Handlers) portForward(w http.ResponseWriter, r *http.Request) {
	port, err := agentv1.ParsePort(r.PathValue("port"))
	if err != nil {
		writeError(w, r, apierrors.NewBadRequest(err.Error()))
		return
	}
	if proto := r.PathValue("protocol"); proto != "" && !strings.EqualFold(proto, "tcp") {
		writeError(w, r, apierrors.NewBadRequest("protocol: "+strconv.Quote(proto)+" is not supported; port-forward carries TCP"))
		return
	}
	h.stream(w, r, strings.Replace(agentv1.PathPortForward, "{port}", strconv.Itoa(port), 1))
}

// stream connects the caller's websocket to agentPath (console, VNC, a port) on the node agent of the
// running instance named in the request (a VirtualMachine's calls reach its instance of the same
// name). Errors before the upgrade are Status answers; once streaming, the close frame says why the
// stream ended.
func (h *Handlers) stream(w http.ResponseWriter, r *http.Request, agentPath string) {
	_, release, err := h.holdStream(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer release()
	h.streams.Add(1)
	defer h.streams.Done()
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	go func() { // owned: ends with ctx at the latest
		select {
		case <-h.Stopping:
			cancel(errShuttingDown)
		case <-ctx.Done():
		}
	}()
	key := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	vmi, err := h.runningInstance(ctx, key)
	if err == nil {
		err = deviceAbsent(vmi, agentPath)
	}
	var agent *websocket.Conn
	if err == nil {
		agent, err = h.Agents.Dial(ctx, vmi, agentv1.Path(agentPath, key.Namespace, key.Name))
	}
	if errors.Is(context.Cause(ctx), errShuttingDown) { // not a 500 "context canceled"
		if agent != nil {
			_ = agent.Close()
		}
		err = apierrors.NewServiceUnavailable(errShuttingDown.Error())
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	client, err := console.Upgrade(w, r)
	if err != nil {
		_ = agent.Close() // Upgrade answered the client
		return
	}
	_ = console.Serve(ctx, client, console.NewConn(agent))
}

// holdStream takes one of the requesting user's MaxStreamsPerUser places and one of the server's
// MaxStreams (a stream, or an exec), or says which limit is reached; it returns the user's name.
func (h *Handlers) holdStream(r *http.Request) (user string, release func(), err error) {
	user = "system:anonymous"
	if u, ok := request.UserFrom(r.Context()); ok {
		user = u.GetName()
	}
	releaseUser, ok := h.perUser.Acquire(user, MaxStreamsPerUser)
	if !ok {
		return user, nil, apierrors.NewTooManyRequests(fmt.Sprintf("user %s already has %d streams open through this virt-api, the limit", user, MaxStreamsPerUser), 1)
	}
	releaseSlot, ok := h.all.Acquire("", MaxStreams)
	if !ok {
		releaseUser()
		return user, nil, apierrors.NewServiceUnavailable(fmt.Sprintf("this virt-api already has %d streams open, the limit", MaxStreams))
	}
	return user, func() { releaseSlot(); releaseUser() }, nil
}

// Wait returns once every stream has ended (after Stopping is closed, they end promptly).
func (h *Handlers) Wait() { h.streams.Wait() }

// deviceAbsent is KubeVirt's 400 for a console of an instance without a serial console, or a VNC
// stream of one without a graphics device.
func deviceAbsent(vmi *virtv1.VirtualMachineInstance, agentPath string) error {
	d := vmi.Spec.Domain.Devices
	switch {
	case agentPath == agentv1.PathConsole && d.AutoattachSerialConsole != nil && !*d.AutoattachSerialConsole:
		return apierrors.NewBadRequest("No serial consoles are present.")
	case agentPath == agentv1.PathVNC && d.AutoattachGraphicsDevice != nil && !*d.AutoattachGraphicsDevice:
		return apierrors.NewBadRequest("No graphics devices are present.")
	}
	return nil
}
