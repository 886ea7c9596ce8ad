package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/apiserver/lifecycle"
	"github.com/podvirt/podvirt/console"
	podvirtversion "github.com/podvirt/podvirt/internal/version"
)

// maxBody bounds a subresource call's body.
const maxBody = 64 << 10

// Handlers serve the subresource calls with the server's own client; the server in front of them
// authenticates the caller and authorizes the subresource before a handler runs.
type Handlers struct {
	Client client.Client
	// Agents reaches node agents (pause, unpause, softreboot, streams); nil: those calls answer 503.
	Agents *Agents
	// Stopping is closed when the server shuts down: open streams close, telling their clients why.
	Stopping <-chan struct{}

	streams sync.WaitGroup
	perUser console.Limiter // streams per user, at most MaxStreamsPerUser
	all     console.Limiter // every stream (one key), at most MaxStreams
}

// MaxStreamsPerUser bounds the streams (consoles, VNC, forwarded connections) one user may hold
// open through one virt-api; one more is refused with 429 naming the limit.
const MaxStreamsPerUser = 128

// MaxStreams bounds the streams one virt-api holds open for all users together (ServiceAccounts
// are anyone's to create, so the per-user bound alone bounds nothing); one more is refused with 503
// naming the limit. A stream never holds a whole frame, but its joiner's buffers (32 KiB each way),
// websocket buffers, two TLS connections and goroutines: about 150–250 KiB (estimated, not
// measured), so 512 of them stay well inside virt-api's 256Mi.
const MaxStreams = 512

// Routes registers the calls of subv1.Table under prefix (/apis/subresources.kubevirt.io/VERSION) on
// mux, each with its handler (calls); a row without one panics, which a unit test catches.
func (h *Handlers) Routes(mux *http.ServeMux, prefix string) {
	calls := h.calls()
	for _, sr := range subv1.Table() {
		handle, ok := calls[sr.Name]
		if !ok {
			panic("apiserver: no handler for subresource " + sr.Resource + "/" + sr.Name)
		}
		for _, params := range sr.Params {
			mux.HandleFunc(sr.Method+" "+prefix+sr.Path(params), handle)
		}
	}
	mux.HandleFunc("GET "+prefix+"/"+subv1.Version, h.version)
	mux.HandleFunc("GET "+prefix+"/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
}

// calls is the handler of each subresource name (the same on a VM and on its instance).
func (h *Handlers) calls() map[string]http.HandlerFunc {
	agent := func(body func() any, path string) http.HandlerFunc { // a new body per request
		return func(w http.ResponseWriter, r *http.Request) { h.agentCall(w, r, body(), path) }
	}
	stream := func(path string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { h.stream(w, r, path) }
	}
	return map[string]http.HandlerFunc{
		subv1.Start:          h.start,
		subv1.Stop:           h.stop,
		subv1.Restart:        h.restart,
		subv1.Migrate:        h.migrate,
		subv1.Pause:          agent(func() any { return &subv1.PauseOptions{} }, agentv1.PathPause),
		subv1.Unpause:        agent(func() any { return &subv1.UnpauseOptions{} }, agentv1.PathUnpause),
		subv1.SoftReboot:     agent(func() any { return &struct{}{} }, agentv1.PathSoftReboot),
		subv1.Reset:          agent(func() any { return &struct{}{} }, agentv1.PathReset),
		subv1.GuestOSInfo:    h.guestAgentRead(guestOSInfo),
		subv1.UserList:       h.guestAgentRead(userList),
		subv1.FileSystemList: h.guestAgentRead(fileSystemList),
		subv1.Freeze:         h.freeze,
		subv1.Unfreeze:       h.unfreeze,
		subv1.Exec:           h.exec,
		subv1.ExpandSpec:     h.expandSpec,
		subv1.ObjectGraph:    h.objectGraph,
		subv1.Console:        stream(agentv1.PathConsole),
		subv1.VNC:            stream(agentv1.PathVNC),
		subv1.PortForward:    h.portForward,
	}
}

func (h *Handlers) start(w http.ResponseWriter, r *http.Request) {
	var opts subv1.StartOptions
	h.vmCall(w, r, &opts, nil, func(vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance) (lifecycle.Patch, error) {
		return lifecycle.Start(vm, vmi, opts.Paused)
	})
}

func (h *Handlers) stop(w http.ResponseWriter, r *http.Request) {
	var opts subv1.StopOptions
	h.vmCall(w, r, &opts, func() *int64 { return opts.GracePeriod }, lifecycle.Stop)
}

func (h *Handlers) restart(w http.ResponseWriter, r *http.Request) {
	var opts subv1.RestartOptions
	h.vmCall(w, r, &opts, func() *int64 { return opts.GracePeriodSeconds }, lifecycle.Restart)
}

// version answers with the server's build (KubeVirt's virt-api answers its version.Info here).
func (h *Handlers) version(w http.ResponseWriter, _ *http.Request) {
	responsewriters.WriteRawJSON(http.StatusOK, podvirtversion.Get(), w)
}

// vmCall is one start/stop/restart call: read the body into opts, read the VM and its instance,
// decide, patch a given grace period into the running instance, apply the decision. 202 on success
// (as KubeVirt); every failure is a Status naming the object and the cause.
func (h *Handlers) vmCall(w http.ResponseWriter, r *http.Request, opts any, grace func() *int64,
	decide func(*virtv1.VirtualMachine, *virtv1.VirtualMachineInstance) (lifecycle.Patch, error)) {
	ctx, key := r.Context(), types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	err := readBody(r, opts)
	if err == nil {
		err = h.applyVMCall(ctx, key, dryRun(opts), grace, decide)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// agentCall is a call the instance's node agent carries out (pause, unpause): the instance must be
// running; virt-api forwards the call to the agent over mutual TLS. 202 on success (as KubeVirt).
func (h *Handlers) agentCall(w http.ResponseWriter, r *http.Request, opts any, agentPath string) {
	ctx, key := r.Context(), types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	err := readBody(r, opts)
	var vmi *virtv1.VirtualMachineInstance
	if err == nil {
		vmi, err = h.runningInstance(ctx, key)
	}
	if err == nil && !dryRun(opts) {
		path := agentv1.Path(agentPath, key.Namespace, key.Name)
		err = h.Agents.Put(ctx, vmi, path)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// migrate creates a migration of the VM's running instance (KubeVirt's name prefix); the migration
// webhook refuses a second one while the first is in progress.
func (h *Handlers) migrate(w http.ResponseWriter, r *http.Request) {
	ctx, key := r.Context(), types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	var opts subv1.MigrateOptions
	err := readBody(r, &opts)
	if err == nil && len(opts.AddedNodeSelector) > 0 {
		err = apierrors.NewBadRequest("addedNodeSelector: not supported by this server yet")
	}
	if err == nil {
		err = h.Client.Get(ctx, key, &virtv1.VirtualMachine{})
	}
	if err == nil {
		_, err = h.runningInstance(ctx, key)
		if apierrors.IsNotFound(err) {
			err = apierrors.NewConflict(schema.GroupResource{Group: virtv1.GroupName, Resource: "virtualmachines"}, key.Name,
				errors.New("VM is not running: it has no VirtualMachineInstance to migrate"))
		}
	}
	if err == nil {
		m := &virtv1.VirtualMachineInstanceMigration{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, GenerateName: "kubevirt-migrate-vm-"},
			Spec:       virtv1.VirtualMachineInstanceMigrationSpec{VMIName: key.Name},
		}
		var copts []client.CreateOption
		if slices.Contains(opts.DryRun, metav1.DryRunAll) {
			copts = append(copts, client.DryRunAll)
		}
		err = h.Client.Create(ctx, m, copts...)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// runningInstance is the instance under key, or an error: 404, or 409 when it is not running.
func (h *Handlers) runningInstance(ctx context.Context, key types.NamespacedName) (*virtv1.VirtualMachineInstance, error) {
	vmi := &virtv1.VirtualMachineInstance{}
	if err := h.Client.Get(ctx, key, vmi); err != nil {
		return nil, err
	}
	if vmi.Status.Phase != virtv1.Running {
		return nil, apierrors.NewConflict(schema.GroupResource{Group: virtv1.GroupName, Resource: "virtualmachineinstances"}, key.Name,
			fmt.Errorf("VMI is not running (phase %q)", vmi.Status.Phase))
	}
	return vmi, nil
}

func (h *Handlers) applyVMCall(ctx context.Context, key types.NamespacedName, dry bool, grace func() *int64,
	decide func(*virtv1.VirtualMachine, *virtv1.VirtualMachineInstance) (lifecycle.Patch, error)) error {
	vm := &virtv1.VirtualMachine{}
	if err := h.Client.Get(ctx, key, vm); err != nil {
		return err
	}
	vmi := &virtv1.VirtualMachineInstance{}
	switch err := h.Client.Get(ctx, key, vmi); {
	case apierrors.IsNotFound(err):
		vmi = nil
	case err != nil:
		return err
	}
	p, err := decide(vm, vmi)
	if err != nil {
		return err
	}
	var opts []client.PatchOption
	var statusOpts []client.SubResourcePatchOption
	if dry {
		opts, statusOpts = append(opts, client.DryRunAll), append(statusOpts, client.DryRunAll)
	}
	if grace != nil {
		if g := grace(); g != nil && vmi != nil {
			if *g < 0 || *g > virtv1.MaxGracePeriodSeconds {
				return apierrors.NewBadRequest(fmt.Sprintf("gracePeriod: must be between 0 and %d seconds, got %d", virtv1.MaxGracePeriodSeconds, *g))
			}
			body := fmt.Appendf(nil, `{"spec":{"terminationGracePeriodSeconds":%d}}`, *g)
			if err := h.Client.Patch(ctx, vmi, client.RawPatch(types.MergePatchType, body), opts...); err != nil {
				return fmt.Errorf("set the grace period of virtualmachineinstance %s: %w", key, err)
			}
		}
	}
	body, err := p.JSON()
	if err != nil {
		return err
	}
	patch := client.RawPatch(types.JSONPatchType, body)
	if p.Status {
		err = h.Client.Status().Patch(ctx, vm, patch, statusOpts...)
	} else {
		err = h.Client.Patch(ctx, vm, patch, opts...)
	}
	if isTestFailed(err) {
		// The test op failed: the VM changed between our read and the patch.
		return apierrors.NewConflict(schema.GroupResource{Group: virtv1.GroupName, Resource: "virtualmachines"}, key.Name,
			errors.New("the VirtualMachine changed while the request was processed; try again"))
	}
	return err
}

// isTestFailed recognizes the apiserver's answer to a JSON patch whose test op failed: 422 Invalid
// naming no object and no field (a validation failure names both); see
// TestStaleSubresourceCallChangesNothing, which checks that shape against the real apiserver.
func isTestFailed(err error) bool {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return false
	}
	st := se.Status()
	return st.Code == http.StatusUnprocessableEntity && st.Reason == metav1.StatusReasonInvalid &&
		(st.Details == nil || (st.Details.Name == "" && len(st.Details.Causes) == 0))
}

// readBody decodes an optional JSON body into opts; malformed JSON is a 400 naming the body.
func readBody(r *http.Request, opts any) error {
	return readBodyUpTo(r, opts, maxBody)
}

// readBodyUpTo is readBody for a body of at most limit bytes.
func readBodyUpTo(r *http.Request, opts any, limit int) error {
	data, err := io.ReadAll(io.LimitReader(r.Body, int64(limit)+1))
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("read the request body: %v", err))
	}
	if len(data) > limit {
		return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("the request body is larger than %d bytes", limit))
	}
	if len(data) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(opts); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("the request body is not valid %T: %v", opts, err))
	}
	return nil
}

// dryRun reports whether opts ask for dryRun: [All].
func dryRun(opts any) bool {
	var d []string
	switch o := opts.(type) {
	case *subv1.StartOptions:
		d = o.DryRun
	case *subv1.StopOptions:
		d = o.DryRun
	case *subv1.RestartOptions:
		d = o.DryRun
	case *subv1.PauseOptions:
		d = o.DryRun
	case *subv1.UnpauseOptions:
		d = o.DryRun
	}
	return slices.Contains(d, metav1.DryRunAll)
}

// codecs encode Status bodies (and discovery documents).
var codecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return serializer.NewCodecFactory(s)
}()

// writeError answers with err as a Status (its code, or 500 for a non-API error).
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	responsewriters.ErrorNegotiated(err, codecs, subv1.SchemeGroupVersion, w, r)
}
