package launcher

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/podvirt/podvirt/launcherapi"
)

// maxBody bounds a request body (a VMI is a few KiB).
const maxBody = 4 << 20

// newHandler serves command protocol v1 (see launcherapi).
func newHandler(g *guest) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+launcherapi.PathPing, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"version": launcherapi.Version})
	})
	mux.HandleFunc("GET "+launcherapi.PathStatus, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, g.Status())
	})
	mux.HandleFunc("POST "+launcherapi.PathSync, func(w http.ResponseWriter, r *http.Request) {
		var req launcherapi.SyncRequest
		if !decode(w, r, &req) {
			return
		}
		reply(w, r, g, request{op: opSync, sync: req}, http.StatusOK)
	})
	mux.HandleFunc("POST "+launcherapi.PathShutdown, func(w http.ResponseWriter, r *http.Request) {
		var req launcherapi.ShutdownRequest
		if !decode(w, r, &req) {
			return
		}
		if req.GracePeriodSeconds < 0 {
			writeJSON(w, http.StatusBadRequest, launcherapi.Error{Message: "gracePeriodSeconds: must not be negative"})
			return
		}
		reply(w, r, g, request{op: opShutdown, grace: time.Duration(req.GracePeriodSeconds) * time.Second}, http.StatusAccepted)
	})
	mux.HandleFunc("POST "+launcherapi.PathKill, func(w http.ResponseWriter, r *http.Request) {
		reply(w, r, g, request{op: opKill}, http.StatusAccepted)
	})
	mux.HandleFunc("POST "+launcherapi.PathPause, func(w http.ResponseWriter, r *http.Request) {
		reply(w, r, g, request{op: opPause}, http.StatusOK)
	})
	mux.HandleFunc("POST "+launcherapi.PathUnpause, func(w http.ResponseWriter, r *http.Request) {
		reply(w, r, g, request{op: opUnpause}, http.StatusOK)
	})
	return mux
}

// decode reads a JSON body (an empty body is the zero request); it answers 400 itself on failure.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(v)
	if err != nil && !errors.Is(err, io.EOF) {
		writeJSON(w, http.StatusBadRequest, launcherapi.Error{Message: "body: " + err.Error()})
		return false
	}
	return true
}

// reply runs the request on the guest's loop and answers with the status, or the error.
func reply(w http.ResponseWriter, r *http.Request, g *guest, req request, okCode int) {
	if err := g.do(r.Context(), req); err != nil {
		code := http.StatusInternalServerError
		switch {
		case errors.Is(err, errBadRequest):
			code = http.StatusBadRequest
		case errors.Is(err, errConflict):
			code = http.StatusConflict
		}
		writeJSON(w, code, launcherapi.Error{Message: err.Error()})
		return
	}
	writeJSON(w, okCode, g.Status())
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
