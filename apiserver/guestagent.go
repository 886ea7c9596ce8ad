package apiserver

import (
	"log/slog"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// The guest agent's calls: guestosinfo, userlist and filesystemlist read what the agent reports
// (KubeVirt's shapes), freeze and unfreeze (KubeVirt's bodies), and exec, Podvirt's own.

// guestAgentRead answers what the instance's guest agent reports, in the shape the subresource gives it.
func (h *Handlers) guestAgentRead(shape func(*virtv1.VirtualMachineInstanceGuestAgentInfo) any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var info virtv1.VirtualMachineInstanceGuestAgentInfo
		err := h.toAgent(r, http.MethodGet, agentv1.PathGuestAgentInfo, nil, &info, agentCallTimeout)
		if err != nil {
			writeError(w, r, err)
			return
		}
		responsewriters.WriteRawJSON(http.StatusOK, shape(&info), w)
	}
}

// guestAgentShapes are the answers of guestosinfo, userlist and filesystemlist.
func guestOSInfo(info *virtv1.VirtualMachineInstanceGuestAgentInfo) any {
	info.Kind, info.APIVersion = "VirtualMachineInstanceGuestAgentInfo", virtv1.SchemeGroupVersion.String()
	return info
}

func userList(info *virtv1.VirtualMachineInstanceGuestAgentInfo) any {
	l := &virtv1.VirtualMachineInstanceGuestOSUserList{Items: info.UserList}
	if l.Items == nil {
		l.Items = []virtv1.VirtualMachineInstanceGuestOSUser{}
	}
	l.Kind, l.APIVersion = "VirtualMachineInstanceGuestOSUserList", virtv1.SchemeGroupVersion.String()
	return l
}

func fileSystemList(info *virtv1.VirtualMachineInstanceGuestAgentInfo) any {
	l := &virtv1.VirtualMachineInstanceFileSystemList{Items: info.FSInfo.Filesystems}
	if l.Items == nil {
		l.Items = []virtv1.VirtualMachineInstanceFileSystem{}
	}
	l.Kind, l.APIVersion = "VirtualMachineInstanceFileSystemList", virtv1.SchemeGroupVersion.String()
	return l
}

// freeze freezes the guest's file systems (KubeVirt's body: unfreezeTimeout).
func (h *Handlers) freeze(w http.ResponseWriter, r *http.Request) {
	var body virtv1.FreezeUnfreezeTimeout
	err := readBody(r, &body)
	if err == nil {
		if _, verr := launcherv1.FreezeRequestFor(body.UnfreezeTimeout); verr != nil {
			err = apierrors.NewBadRequest(verr.Error())
		}
	}
	if err == nil {
		err = h.toAgent(r, http.MethodPut, agentv1.PathFreeze, &body, nil, agentCallTimeout)
	}
	answer(w, r, err)
}

// unfreeze thaws the guest's file systems.
func (h *Handlers) unfreeze(w http.ResponseWriter, r *http.Request) {
	answer(w, r, h.toAgent(r, http.MethodPut, agentv1.PathUnfreeze, nil, nil, agentCallTimeout))
}

// exec runs a command in the guest through its agent and answers its ExecResult. Each exec counts
// as one of the caller's streams (it may run for up to an hour), and is logged with who asked.
func (h *Handlers) exec(w http.ResponseWriter, r *http.Request) {
	var req subv1.ExecRequest
	err := readBodyUpTo(r, &req, subv1.MaxExecRequestBytes)
	if err == nil {
		if verr := req.Validate(); verr != nil {
			err = apierrors.NewBadRequest(verr.Error())
		}
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	user, release, err := h.holdStream(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer release()
	var res subv1.ExecResult
	err = h.toAgent(r, http.MethodPost, agentv1.PathExec, &req, &res, launcherv1.ExecTimeout(&req)+2*launcherv1.ExecGrace)
	attrs := []any{"user", user, "namespace", r.PathValue("namespace"), "name", r.PathValue("name"), "program", req.Command[0], "args", len(req.Command) - 1}
	if err != nil {
		slog.Info("exec in guest refused or failed", append(attrs, "err", err)...)
		writeError(w, r, err)
		return
	}
	slog.Info("exec in guest", append(attrs, "exitCode", res.ExitCode)...)
	res.Kind, res.APIVersion = "ExecResult", subv1.SchemeGroupVersion.String()
	responsewriters.WriteRawJSON(http.StatusOK, &res, w)
}

// toAgent sends a call about the running instance named in r to its node agent (agentPath).
func (h *Handlers) toAgent(r *http.Request, method, agentPath string, in, out any, timeout time.Duration) error {
	ctx, key := r.Context(), types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	vmi, err := h.runningInstance(ctx, key)
	if err != nil {
		return err
	}
	return h.Agents.Call(ctx, vmi, method, agentv1.Path(agentPath, key.Namespace, key.Name), in, out, timeout)
}

// answer is 200 without a body, or err.
func answer(w http.ResponseWriter, r *http.Request, err error) {
	if err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}
