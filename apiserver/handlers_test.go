package apiserver

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/utils/ptr"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

func TestIsTestFailed(t *testing.T) {
	// What the kube-apiserver answers when a JSON patch's test op fails (observed, and checked by
	// controllers' TestStaleSubresourceCallChangesNothing).
	testFailed := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity,
		Reason: metav1.StatusReasonInvalid, Message: "the server rejected our request due to an error in our request", Details: &metav1.StatusDetails{}}}
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "kubevirt.io", Kind: "VirtualMachine"}, "vm",
		field.ErrorList{field.Invalid(field.NewPath("spec", "runStrategy"), "x", "unsupported")})
	assert.True(t, isTestFailed(testFailed))
	assert.False(t, isTestFailed(invalid), "a validation failure names its object and field: not a race")
	assert.False(t, isTestFailed(errors.New("connection refused")))
	assert.False(t, isTestFailed(nil))
}

// Every row of the subresource table is routed (with each of its parameter forms), and discovery
// lists it with its verb: a row added without a handler fails here, not in a user's request.
func TestEveryTableRowIsServed(t *testing.T) {
	mux := http.NewServeMux()
	assert.NotPanics(t, func() { (&Handlers{}).Routes(mux, "/apis/subresources.kubevirt.io/v1") })
	listed := map[string]string{}
	for _, r := range resources() {
		listed[r.Name] = r.Verbs[0]
	}
	for _, sr := range subv1.Table() {
		for _, params := range sr.Params {
			path := strings.NewReplacer("{namespace}", "ns", "{name}", "vm", "{port}", "22", "{protocol}", "tcp").
				Replace("/apis/subresources.kubevirt.io/v1" + sr.Path(params))
			_, pattern := mux.Handler(httptest.NewRequest(sr.Method, path, nil))
			assert.NotEmpty(t, pattern, "%s %s is not routed", sr.Method, path)
		}
		assert.Equal(t, sr.Verb, listed[sr.Resource+"/"+sr.Name], "discovery of %s/%s", sr.Resource, sr.Name)
	}
	assert.Len(t, resources(), len(subv1.Table()))
}

// Streams are bounded per user and for the whole virt-api; the one beyond a bound is refused naming
// it, before anything is looked up or dialled.
func TestStreamsAreBounded(t *testing.T) {
	open := func(h *Handlers, name string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/namespaces/ns/virtualmachineinstances/vm/console", nil)
		r = r.WithContext(request.WithUser(r.Context(), &user.DefaultInfo{Name: name}))
		w := httptest.NewRecorder()
		h.stream(w, r, "/console")
		return w
	}
	h := &Handlers{}
	for range MaxStreamsPerUser {
		_, ok := h.perUser.Acquire("alice", MaxStreamsPerUser)
		assert.True(t, ok)
	}
	w := open(h, "alice")
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Contains(t, w.Body.String(), "user alice already has 128 streams open through this virt-api, the limit")

	h = &Handlers{}
	for range MaxStreams {
		_, ok := h.all.Acquire("", MaxStreams)
		assert.True(t, ok)
	}
	w = open(h, "bob")
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Contains(t, w.Body.String(), "this virt-api already has 512 streams open, the limit")
	_, ok := h.perUser.Acquire("bob", 1)
	assert.True(t, ok, "the refused stream gave its user's slot back")
}

// A console of an instance without a serial console, or VNC without a graphics device, is KubeVirt's
// 400 naming what is absent, not a failed dial.
func TestStreamOfAnAbsentDevice(t *testing.T) {
	vmi := &virtv1.VirtualMachineInstance{}
	assert.NoError(t, deviceAbsent(vmi, agentv1.PathConsole), "attached by default")
	assert.NoError(t, deviceAbsent(vmi, agentv1.PathVNC))
	vmi.Spec.Domain.Devices.AutoattachSerialConsole = ptr.To(false)
	vmi.Spec.Domain.Devices.AutoattachGraphicsDevice = ptr.To(false)
	for path, msg := range map[string]string{agentv1.PathConsole: "No serial consoles are present.", agentv1.PathVNC: "No graphics devices are present."} {
		err := deviceAbsent(vmi, path)
		assert.True(t, apierrors.IsBadRequest(err), path)
		assert.EqualError(t, err, msg)
	}
	assert.NoError(t, deviceAbsent(vmi, agentv1.PathPortForward))
}
