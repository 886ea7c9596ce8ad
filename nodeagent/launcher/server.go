package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"golang.org/x/sys/unix"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// maxBody bounds a request body (a VMI is a few KiB).
const maxBody = 4 << 20

// newHandler serves command protocol v1 (see api/launcher/v1).
func newHandler(g *guest) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+launcherv1.PathPing, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"version": launcherv1.Version})
	})
	mux.HandleFunc("GET "+launcherv1.PathStatus, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, g.Status())
	})
	mux.HandleFunc("PUT "+launcherv1.PathNodeCheck, func(w http.ResponseWriter, r *http.Request) {
		var req launcherv1.NodeCheck
		if !decode(w, r, &req) {
			return
		}
		if !fromAgent(r) {
			writeJSON(w, http.StatusForbidden, launcherv1.Error{Message: "only the node agent names where the kubelet check asks"})
			return
		}
		if err := g.kubelet.configure(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, launcherv1.Error{Message: err.Error()})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST "+launcherv1.PathSync, syncHandler(g, opSync))
	mux.HandleFunc("POST "+launcherv1.PathShutdown, func(w http.ResponseWriter, r *http.Request) {
		var req launcherv1.ShutdownRequest
		if !decode(w, r, &req) {
			return
		}
		grace, err := shutdownGrace(req)
		if err != nil {
			writeError(w, err)
			return
		}
		reply(w, r, g, request{op: opShutdown, grace: grace}, http.StatusAccepted)
	})
	mux.HandleFunc("POST "+launcherv1.PathKill, func(w http.ResponseWriter, r *http.Request) {
		reply(w, r, g, request{op: opKill}, http.StatusAccepted)
	})
	mux.HandleFunc("POST "+launcherv1.PathPause, func(w http.ResponseWriter, r *http.Request) {
		reply(w, r, g, request{op: opPause}, http.StatusOK)
	})
	mux.HandleFunc("POST "+launcherv1.PathUnpause, func(w http.ResponseWriter, r *http.Request) {
		reply(w, r, g, request{op: opUnpause}, http.StatusOK)
	})
	mux.HandleFunc("POST "+launcherv1.PathReboot, func(w http.ResponseWriter, r *http.Request) {
		if g.Status().AgentConnected {
			switch err := g.rebootThroughAgent(r.Context()); {
			case err == nil:
				writeJSON(w, http.StatusAccepted, g.Status())
				return
			case errors.Is(err, errRebootUnderway):
				writeError(w, err)
				return
			} // else the ACPI button
		}
		reply(w, r, g, request{op: opReboot}, http.StatusAccepted)
	})
	mux.HandleFunc("POST "+launcherv1.PathReset, func(w http.ResponseWriter, r *http.Request) {
		reply(w, r, g, request{op: opReset}, http.StatusAccepted)
	})
	mux.HandleFunc("GET "+launcherv1.PathPortForward+"{port}", portForward(g))
	mux.HandleFunc("GET "+launcherv1.PathGuestAgentInfo, func(w http.ResponseWriter, r *http.Request) {
		info, err := g.guestAgentInfo(r.Context())
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, info)
	})
	mux.HandleFunc("POST "+launcherv1.PathFreeze, func(w http.ResponseWriter, r *http.Request) {
		var req launcherv1.FreezeRequest
		if decode(w, r, &req) {
			answer(w, g.freeze(r.Context(), req))
		}
	})
	mux.HandleFunc("POST "+launcherv1.PathUnfreeze, func(w http.ResponseWriter, r *http.Request) {
		answer(w, g.unfreeze(r.Context()))
	})
	mux.HandleFunc("POST "+launcherv1.PathExec, func(w http.ResponseWriter, r *http.Request) {
		var req subv1.ExecRequest
		if !decode(w, r, &req) {
			return
		}
		res, err := g.exec(r.Context(), &req)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
	mux.HandleFunc("POST "+launcherv1.PathMigrationTarget, syncHandler(g, opPrepareTarget))
	mux.HandleFunc("POST "+launcherv1.PathMigrate, func(w http.ResponseWriter, r *http.Request) {
		var req launcherv1.MigrateRequest
		if !decode(w, r, &req) {
			return
		}
		if err := validMigrate(req); err != nil {
			writeError(w, err)
			return
		}
		reply(w, r, g, request{op: opMigrate, migrate: req}, http.StatusAccepted)
	})
	mux.HandleFunc("POST "+launcherv1.PathMigrateCancel, func(w http.ResponseWriter, r *http.Request) {
		reply(w, r, g, request{op: opCancelMigration}, http.StatusAccepted)
	})
	return mux
}

// syncHandler serves a SyncRequest: a sync, or the preparation of a migration target.
func syncHandler(g *guest, op opKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req launcherv1.SyncRequest
		if !decode(w, r, &req) {
			return
		}
		if op == opSync {
			g.markSynced()
		}
		if fromAgent(r) { // only the agent names where the kubelet check asks
			if err := g.kubelet.configure(req.NodeCheck); err != nil {
				g.cfg.Log.Warn("The sync's node check is refused: the agent's silence alone fences", "err", err)
			}
		}
		vmi, err := g.parseVMI(req)
		if err == nil { // waiting here, not in the guest's loop, keeps the loop free meanwhile
			err = awaitInputs(r.Context(), vmi, g.cfg)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		reply(w, r, g, request{op: op, sync: req}, http.StatusOK)
	}
}

// decode reads a JSON body (an empty body is the zero request); it answers 400 itself on failure.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(v)
	if err != nil && !errors.Is(err, io.EOF) {
		writeJSON(w, http.StatusBadRequest, launcherv1.Error{Message: "body: " + err.Error()})
		return false
	}
	return true
}

// shutdownGrace is a shutdown request's grace period, within [0, virtv1.MaxGracePeriodSeconds].
func shutdownGrace(req launcherv1.ShutdownRequest) (time.Duration, error) {
	if g := req.GracePeriodSeconds; g < 0 || g > virtv1.MaxGracePeriodSeconds {
		return 0, fmt.Errorf("%w: gracePeriodSeconds: must be between 0 and %d, got %d", errBadRequest, virtv1.MaxGracePeriodSeconds, g)
	}
	return time.Duration(req.GracePeriodSeconds) * time.Second, nil
}

// maxMigrationUID bounds a migration request's uid (a Kubernetes UID is 36 bytes): it is kept and
// reported in every status.
const maxMigrationUID = 128

// validMigrate checks a migration request before it reaches the guest.
func validMigrate(req launcherv1.MigrateRequest) error {
	switch {
	case req.UID == "":
		return fmt.Errorf("%w: uid: required", errBadRequest)
	case len(req.UID) > maxMigrationUID:
		return fmt.Errorf("%w: uid: at most %d bytes, got %d", errBadRequest, maxMigrationUID, len(req.UID))
	case req.ProgressTimeoutSeconds < 0 || req.ProgressTimeoutSeconds > launcherv1.MaxMigrationTimeoutSeconds:
		return fmt.Errorf("%w: progressTimeoutSeconds: must be between 0 and %d, got %d", errBadRequest, launcherv1.MaxMigrationTimeoutSeconds, req.ProgressTimeoutSeconds)
	case req.CompletionTimeoutPerGiBSeconds < 0 || req.CompletionTimeoutPerGiBSeconds > launcherv1.MaxMigrationTimeoutSeconds:
		return fmt.Errorf("%w: completionTimeoutPerGiBSeconds: must be between 0 and %d, got %d", errBadRequest, launcherv1.MaxMigrationTimeoutSeconds, req.CompletionTimeoutPerGiBSeconds)
	}
	return nil
}

// reply runs the request on the guest's loop and answers with the status, or the error.
func reply(w http.ResponseWriter, r *http.Request, g *guest, req request, okCode int) {
	if err := g.do(r.Context(), req); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, okCode, g.Status())
}

// writeError answers with err: 400 for a malformed request, 409 where the guest's state does not
// allow it, 503 for a sync before the disks are ready, else 500.
func writeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, errBadRequest):
		code = http.StatusBadRequest
	case errors.Is(err, errConflict):
		code = http.StatusConflict
	case errors.Is(err, errNotReady):
		code = http.StatusServiceUnavailable
	case errors.Is(err, errNoAgent):
		code = http.StatusConflict
	case errors.Is(err, errAgentUnavailable):
		code = http.StatusServiceUnavailable
	case errors.Is(err, errExecTimeout):
		code = http.StatusGatewayTimeout
	}
	writeJSON(w, code, launcherv1.Error{Message: err.Error()})
}

// answer answers a call without a body: 200, or err.
func answer(w http.ResponseWriter, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// peerUIDKey keys the uid of the process at the other end of a command-socket connection.
type peerUIDKey struct{}

// peerContext records the connecting process's uid (SO_PEERCRED) in the context of every request
// on a unix connection; heard reads it.
func peerContext(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) { cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil || credErr != nil {
		return ctx
	}
	return context.WithValue(ctx, peerUIDKey{}, cred.Uid)
}
