package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	corev1 "k8s.io/api/core/v1"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// The guest agent's calls, virt-api's only: what the agent reports, freeze and unfreeze, exec. The
// launcher talks to the guest agent through libvirt; here they are passed on.

// maxAgentBody bounds the body of a freeze or exec call.
const maxAgentBody = subv1.MaxExecRequestBytes

// guestAgentInfo answers what the instance's guest agent reports (a caller holds one of the
// instance's MaxStreamsPerInstance places while it waits: the launcher fetches it at most every
// few seconds for all callers).
func (s *SubresourceServer) guestAgentInfo(w http.ResponseWriter, r *http.Request) {
	pod, release, ok := s.hold(w, r)
	if !ok {
		return
	}
	defer release()
	info, err := s.Dial(pod).GuestAgentInfo(r.Context())
	if err != nil {
		writeLauncherError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// freeze freezes the guest's file systems (body: KubeVirt's FreezeUnfreezeTimeout).
func (s *SubresourceServer) freeze(w http.ResponseWriter, r *http.Request) {
	var body virtv1.FreezeUnfreezeTimeout
	if !readJSON(w, r, &body) {
		return
	}
	req, err := launcherv1.FreezeRequestFor(body.UnfreezeTimeout)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.agentCall(w, r, func(l Launcher, ctx context.Context) error { return l.Freeze(ctx, req) })
}

// unfreeze thaws the guest's file systems.
func (s *SubresourceServer) unfreeze(w http.ResponseWriter, r *http.Request) {
	s.agentCall(w, r, Launcher.Unfreeze)
}

// agentCall runs call (reboot, reset, freeze, unfreeze) on the instance's launcher, answering 200 once
// it took it, and wakes the reconciler (the status follows).
func (s *SubresourceServer) agentCall(w http.ResponseWriter, r *http.Request, call func(Launcher, context.Context) error) {
	ctx := r.Context()
	vmi, pod, code, msg := s.find(ctx, r.PathValue("namespace"), r.PathValue("name"))
	if code != http.StatusOK {
		writeError(w, code, msg)
		return
	}
	if err := call(s.Dial(pod), ctx); err != nil {
		writeLauncherError(w, err)
		return
	}
	s.done(ctx, w, vmi)
}

// exec runs a command in the guest and answers its ExecResult. Each exec holds one of the instance's
// MaxStreamsPerInstance places while it runs.
func (s *SubresourceServer) exec(w http.ResponseWriter, r *http.Request) {
	var req subv1.ExecRequest
	if !readJSON(w, r, &req) {
		return
	}
	if err := req.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	pod, release, ok := s.hold(w, r)
	if !ok {
		return
	}
	defer release()
	res, err := s.Dial(pod).Exec(r.Context(), &req)
	if err != nil {
		writeLauncherError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// hold finds the running instance's launcher Pod and takes one of the instance's
// MaxStreamsPerInstance places, or answers why not (429 naming the limit).
func (s *SubresourceServer) hold(w http.ResponseWriter, r *http.Request) (*corev1.Pod, func(), bool) {
	_, pod, code, msg := s.find(r.Context(), r.PathValue("namespace"), r.PathValue("name"))
	if code != http.StatusOK {
		writeError(w, code, msg)
		return nil, nil, false
	}
	release, ok := s.perInstance.Acquire(string(pod.UID), MaxStreamsPerInstance)
	if !ok {
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("virtualmachineinstance %s/%s already has %d streams and guest agent calls open on this node, the limit",
			pod.Namespace, r.PathValue("name"), MaxStreamsPerInstance))
		return nil, nil, false
	}
	return pod, release, true
}

// readJSON decodes a bounded JSON body (none: v stays as is), answering 400 naming the problem.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxAgentBody+1))
	switch {
	case err != nil:
		writeError(w, http.StatusBadRequest, "read the body: "+err.Error())
		return false
	case len(data) > maxAgentBody:
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", maxAgentBody))
		return false
	case len(data) == 0:
		return true
	}
	if err := json.Unmarshal(data, v); err != nil {
		writeError(w, http.StatusBadRequest, "body: "+err.Error())
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
