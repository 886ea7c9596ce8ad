package launcher

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"libvirt.org/go/libvirt"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	"github.com/podvirt/podvirt/internal/splice"
)

// forward returns the loopback port of the Pod that reaches the guest's TCP port: the port itself
// when the VMI declares it (its host forward listens on every address of the Pod), else a host
// forward added now on a free loopback port, kept for later calls.
func (g *guest) forward(port int) (int, error) {
	if local, ok := g.forwards[port]; ok {
		return local, nil
	}
	if g.netdev == "" {
		return 0, errors.New("the guest has no network interface")
	}
	local, err := freeLoopbackPort()
	if err != nil {
		return 0, err
	}
	cmd := fmt.Sprintf("hostfwd_add %s tcp:127.0.0.1:%d-:%d", g.netdev, local, port)
	out, err := g.dom.QemuMonitorCommand(cmd, libvirt.DOMAIN_QEMU_MONITOR_COMMAND_HMP)
	if err == nil && strings.TrimSpace(out) != "" { // HMP reports failures as text
		err = errors.New(strings.TrimSpace(out))
	}
	if err != nil {
		return 0, fmt.Errorf("forward guest port %d: %w", port, err)
	}
	g.forwards[port] = local
	return local, nil
}

// freeLoopbackPort is a TCP port nobody listens on at 127.0.0.1 in the Pod.
func freeLoopbackPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// portForward serves GET PathPortForward{port}: it connects to the guest's port, answers 101 and
// then copies bytes both ways until either side closes.
func portForward(g *guest) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		port, err := strconv.Atoi(r.PathValue("port"))
		if err != nil || port < 1 || port > 65535 {
			writeJSON(w, http.StatusBadRequest, launcherv1.Error{Message: fmt.Sprintf("port: %q is not a port number (1-65535)", r.PathValue("port"))})
			return
		}
		if !strings.EqualFold(r.Header.Get("Upgrade"), launcherv1.UpgradeTCP) {
			writeJSON(w, http.StatusBadRequest, launcherv1.Error{Message: "port-forward needs Connection: Upgrade, Upgrade: " + launcherv1.UpgradeTCP})
			return
		}
		var local int
		if err := g.do(r.Context(), request{op: opForward, port: port, local: &local}); err != nil {
			writeError(w, err)
			return
		}
		var d net.Dialer
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		guestConn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(local)))
		cancel()
		if err != nil {
			writeJSON(w, http.StatusBadGateway, launcherv1.Error{Message: fmt.Sprintf("connect to guest port %d: %v", port, err)})
			return
		}
		if err := splice.Upgrade(context.WithoutCancel(r.Context()), w, launcherv1.UpgradeTCP, guestConn, splice.ClientEndsJoin); err != nil {
			writeJSON(w, http.StatusInternalServerError, launcherv1.Error{Message: err.Error()})
		}
	}
}
