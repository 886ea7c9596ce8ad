package nodeagent

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/console"
	"github.com/podvirt/podvirt/nodeagent/launcherclient"
)

// SubresourceServer serves the subresources of this node's instances over HTTP(S): pause, unpause,
// softreboot and reset act on the launcher and answer 200 at once (the Paused condition follows through
// the reconciler, which Triggers wakes for the instance); console, vnc and portforward are
// websockets onto the guest's serial console (shared), VNC display and TCP ports.
//
// cmd/virt-handler serves it over mutual TLS (AgentTLS): a client certificate of the node CA is
// required, the instance paths serve only virt-api's (APICaller; virt-api has authorized the user
// before), and a migration stream only the source node's agent. Without TLSConfig (tests) it is
// unauthenticated.
type SubresourceServer struct {
	// Addr is the listen address (host:port).
	Addr string
	// Listener, when set, is used instead of listening on Addr.
	Listener net.Listener
	// Reader reads instances and launcher Pods (the manager's cache of this node).
	Reader client.Reader
	// APIReader reads an instance migrating to this node (not in the cache yet); without it no
	// migration stream is served.
	APIReader client.Reader
	// NodeName is this node: instances elsewhere are not found here.
	NodeName string
	// Dial reaches an instance's launcher.
	Dial LauncherDialer
	// Triggers receives the instance after a successful call, so its status is written promptly.
	Triggers chan<- event.GenericEvent
	// TLSConfig serves HTTPS when set.
	TLSConfig *tls.Config
	// APICaller is virt-api's identity (agentv1.VirtAPIIdentity), the only caller of the instance
	// paths when TLSConfig is set.
	APICaller string
	// Consoles shares each guest's serial console among its viewers.
	Consoles console.Hub
	// Vouch reports whether the agent still vouches for its launchers, and until when
	// (Reconciler.Vouch): a pause or unpause asks the launcher for its status, which would vouch for
	// the guest of an agent cut off from the control plane; such calls answer 503 instead, and the
	// others carry the vouch's end. Nil: always, unbounded.
	Vouch func() (bool, time.Duration)
	// AnswerPeer answers another node's agent asking whether this one is cut off from the control
	// plane too (Heartbeat.AnswerPeer); nil: agentv1.PathPeerContact is not served.
	AnswerPeer func() agentv1.PeerContact

	perInstance console.Limiter // streams per instance, at most MaxStreamsPerInstance
}

// MaxStreamsPerInstance bounds the streams callers may hold open to one instance on its agent
// (console viewers, VNC and forwarded connections together). Connections to the port itself are
// bounded while they handshake (handshakeListener); once through mutual TLS they are virt-api's or
// another agent's.
const MaxStreamsPerInstance = 64

// NeedLeaderElection is false: every node agent serves its own node.
func (s *SubresourceServer) NeedLeaderElection() bool { return false }

// Handler routes the subresource calls.
func (s *SubresourceServer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT "+agentv1.PathPause, s.fromVirtAPI(func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, launcherv1.DomainPaused, Launcher.Pause)
	}))
	mux.HandleFunc("PUT "+agentv1.PathUnpause, s.fromVirtAPI(func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, launcherv1.DomainRunning, Launcher.Unpause)
	}))
	mux.HandleFunc("PUT "+agentv1.PathSoftReboot, s.fromVirtAPI(func(w http.ResponseWriter, r *http.Request) {
		s.agentCall(w, r, Launcher.Reboot)
	}))
	mux.HandleFunc("PUT "+agentv1.PathReset, s.fromVirtAPI(func(w http.ResponseWriter, r *http.Request) {
		s.agentCall(w, r, Launcher.Reset)
	}))
	mux.HandleFunc("GET "+agentv1.PathGuestAgentInfo, s.fromVirtAPI(s.guestAgentInfo))
	mux.HandleFunc("PUT "+agentv1.PathFreeze, s.fromVirtAPI(s.freeze))
	mux.HandleFunc("PUT "+agentv1.PathUnfreeze, s.fromVirtAPI(s.unfreeze))
	mux.HandleFunc("POST "+agentv1.PathExec, s.fromVirtAPI(s.exec))
	mux.HandleFunc("GET "+agentv1.PathConsole, s.fromVirtAPI(s.console))
	mux.HandleFunc("GET "+agentv1.PathVNC, s.fromVirtAPI(func(w http.ResponseWriter, r *http.Request) {
		s.stream(w, r, "VNC display", func(ctx context.Context, pod *corev1.Pod) (io.ReadWriteCloser, error) { return s.Dial(pod).VNC(ctx) })
	}))
	mux.HandleFunc("GET "+agentv1.PathPortForward, s.fromVirtAPI(func(w http.ResponseWriter, r *http.Request) {
		port, err := agentv1.ParsePort(r.PathValue("port"))
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		s.stream(w, r, fmt.Sprintf("port %d", port), func(ctx context.Context, pod *corev1.Pod) (io.ReadWriteCloser, error) {
			return s.Dial(pod).PortForward(ctx, port)
		})
	}))
	mux.HandleFunc("GET "+agentv1.PathMigrationStream, s.migrationStream)
	mux.HandleFunc("GET "+agentv1.PathPeerContact, s.peerContact)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	return mux
}

// Start serves until ctx ends, then shuts down gracefully.
func (s *SubresourceServer) Start(ctx context.Context) error {
	ln := s.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.Addr); err != nil {
			return fmt.Errorf("listen for subresources on %s: %w", s.Addr, err)
		}
	}
	if s.TLSConfig != nil {
		hl := listenTLS(ln, s.TLSConfig)
		defer hl.Wait() // after the server has closed it
		ln = hl
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	log.FromContext(ctx).Info("Serving subresources", "address", ln.Addr().String(), "tls", s.TLSConfig != nil)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve subresources: %w", err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shutCtx)
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	if err != nil {
		return fmt.Errorf("stop subresource server: %w", err)
	}
	return nil
}

// callerIs reports whether r's client certificate names want; without TLS (tests) every caller is.
func (s *SubresourceServer) callerIs(r *http.Request, want string) bool {
	return s.TLSConfig == nil || want != "" && agentv1.Caller(r.TLS) == want
}

// fromVirtAPI serves h to virt-api only: another agent (root on its node holds its key) is refused.
func (s *SubresourceServer) fromVirtAPI(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.callerIs(r, s.APICaller) {
			writeError(w, http.StatusForbidden, fmt.Sprintf("only virt-api calls this path, not %q", agentv1.Caller(r.TLS)))
			return
		}
		h(w, r)
	}
}

type launcherCall func(Launcher, context.Context) (launcherv1.Status, error)

// serve moves the instance's guest to state with call; a guest already there is a conflict (as in
// KubeVirt: "already paused").
func (s *SubresourceServer) serve(w http.ResponseWriter, r *http.Request, state launcherv1.DomainState, call launcherCall) {
	ctx := r.Context()
	vmi, pod, code, msg := s.find(ctx, r.PathValue("namespace"), r.PathValue("name"))
	if code != http.StatusOK {
		writeError(w, code, msg)
		return
	}
	ctx, vouching := withVouch(ctx, s.Vouch)
	if !vouching {
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("the node agent on %s has lost the control plane: its guests are not driven until it is back", s.NodeName))
		return
	}
	l := s.Dial(pod)
	st, err := l.Status(ctx)
	if err == nil && st.State == state {
		writeError(w, http.StatusConflict, fmt.Sprintf("virtualmachineinstance %s/%s is already %s", vmi.Namespace, vmi.Name, strings.ToLower(string(state))))
		return
	}
	if err == nil {
		_, err = call(l, ctx)
	}
	if err != nil {
		writeLauncherError(w, err)
		return
	}
	s.done(ctx, w, vmi)
}

// done answers 200 for a call that changed vmi's guest, after waking the reconciler so that the
// status follows promptly.
func (s *SubresourceServer) done(ctx context.Context, w http.ResponseWriter, vmi *virtv1.VirtualMachineInstance) {
	if s.Triggers != nil {
		select {
		case s.Triggers <- event.GenericEvent{Object: vmi}:
		case <-ctx.Done():
		}
	}
	w.WriteHeader(http.StatusOK)
}

// console joins the caller to the guest's serial console (a websocket) until either side leaves;
// every viewer of one guest shares one connection to its console (console.Hub).
func (s *SubresourceServer) console(w http.ResponseWriter, r *http.Request) {
	s.stream(w, r, "serial console", func(ctx context.Context, pod *corev1.Pod) (io.ReadWriteCloser, error) {
		l := s.Dial(pod)
		return s.Consoles.Join(string(pod.UID), func() (net.Conn, error) { return l.SerialConsole(ctx) })
	})
}

// stream connects the caller's websocket to the stream of the guest (its console, VNC, a port)
// that dial opens for the instance's launcher Pod, until either side leaves.
func (s *SubresourceServer) stream(w http.ResponseWriter, r *http.Request, what string, dial func(context.Context, *corev1.Pod) (io.ReadWriteCloser, error)) {
	ctx := r.Context()
	_, pod, code, msg := s.find(ctx, r.PathValue("namespace"), r.PathValue("name"))
	if code != http.StatusOK {
		writeError(w, code, msg)
		return
	}
	release, ok := s.perInstance.Acquire(string(pod.UID), MaxStreamsPerInstance)
	if !ok {
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("virtualmachineinstance %s/%s already has %d streams open on this node, the limit", pod.Namespace, r.PathValue("name"), MaxStreamsPerInstance))
		return
	}
	defer release()
	conn, err := dial(ctx, pod)
	if err != nil {
		var lerr *launcherclient.Error
		switch {
		case errors.As(err, &lerr):
			writeLauncherError(w, err)
			return
		case errors.Is(err, console.ErrTooManyViewers):
			writeError(w, http.StatusTooManyRequests, fmt.Sprintf("the guest's %s: %v", what, err))
			return
		}
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("the guest's %s does not answer: %v", what, err))
		return
	}
	ws, err := console.Upgrade(w, r)
	if err != nil {
		_ = conn.Close() // Upgrade answered the client
		return
	}
	_ = console.Serve(ctx, ws, conn)
}

// find returns a running instance of this node and its launcher Pod, or the HTTP status saying why not.
func (s *SubresourceServer) find(ctx context.Context, ns, name string) (*virtv1.VirtualMachineInstance, *corev1.Pod, int, string) {
	key := client.ObjectKey{Namespace: ns, Name: name}
	vmi := &virtv1.VirtualMachineInstance{}
	err := s.Reader.Get(ctx, key, vmi)
	if (apierrors.IsNotFound(err) || err == nil && vmi.Status.NodeName != s.NodeName) && s.APIReader != nil {
		// The cache holds this node's instances only: one just handed over by a migration reaches it
		// a watch event later than virt-api's own read, which sent the caller here.
		vmi = &virtv1.VirtualMachineInstance{}
		err = s.APIReader.Get(ctx, key, vmi)
	}
	switch {
	case apierrors.IsNotFound(err) || err == nil && vmi.Status.NodeName != s.NodeName:
		return nil, nil, http.StatusNotFound, fmt.Sprintf("virtualmachineinstance %s/%s is not on node %s", ns, name, s.NodeName)
	case err != nil:
		return nil, nil, http.StatusInternalServerError, err.Error()
	case vmi.Status.Phase != virtv1.Running:
		return nil, nil, http.StatusConflict, fmt.Sprintf("virtualmachineinstance %s/%s is not running (phase %q)", ns, name, vmi.Status.Phase)
	}
	pod, err := launcherPodOf(ctx, s.Reader, s.NodeName, vmi)
	switch {
	case err != nil:
		return nil, nil, http.StatusInternalServerError, err.Error()
	case pod == nil:
		return nil, nil, http.StatusNotFound, fmt.Sprintf("virtualmachineinstance %s/%s has no launcher Pod on node %s", ns, name, s.NodeName)
	}
	return vmi, pod, http.StatusOK, ""
}

// writeLauncherError answers with the launcher's refusal (409, 400, 502 for a guest port that refuses,
// 504 for a command that did not exit in time)
// or 503 when the launcher does not answer.
func writeLauncherError(w http.ResponseWriter, err error) {
	var lerr *launcherclient.Error
	switch {
	case errors.As(err, &lerr) && (lerr.StatusCode == http.StatusConflict || lerr.StatusCode == http.StatusBadRequest ||
		lerr.StatusCode == http.StatusBadGateway || lerr.StatusCode == http.StatusGatewayTimeout):
		writeError(w, lerr.StatusCode, lerr.Message)
	case errors.Is(err, launcherclient.ErrUnreachable):
		writeError(w, http.StatusServiceUnavailable, "the instance's launcher does not answer: "+err.Error())
	default:
		writeError(w, http.StatusBadGateway, err.Error())
	}
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}
