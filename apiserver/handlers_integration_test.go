package apiserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/apiserver"
	"github.com/podvirt/podvirt/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

const prefix = "/apis/subresources.kubevirt.io/v1"

// serve runs the subresource handlers against the real apiserver (without the aggregation layer in
// front: these tests are about what each call does, the e2e tests about who may make it).
func serve(t *testing.T, e *testenv.Env) *httptest.Server {
	mux := http.NewServeMux()
	(&apiserver.Handlers{Client: e.Client}).Routes(mux, prefix)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// put makes one call and returns its code and the Status message (empty on success).
func put(t *testing.T, srv *httptest.Server, ns, resource, name, sub, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, srv.URL+prefix+"/namespaces/"+ns+"/"+resource+"/"+name+"/"+sub, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var st metav1.Status
	if resp.StatusCode >= 300 {
		require.NoError(t, json.Unmarshal(data, &st), "error bodies are Status objects: %s", data)
		assert.Equal(t, "Status", st.Kind)
	}
	return resp.StatusCode, st.Message
}

func newVM(ns, name string, strategy virtv1.VirtualMachineRunStrategy) *virtv1.VirtualMachine {
	return &virtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: virtv1.VirtualMachineSpec{RunStrategy: ptr.To(strategy), Template: &virtv1.VirtualMachineInstanceTemplateSpec{
			Spec: virtv1.VirtualMachineInstanceSpec{Domain: virtv1.DomainSpec{
				Resources: virtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64M")}},
			}},
		}},
	}
}

func getVM(t *testing.T, ns, name string) *virtv1.VirtualMachine {
	vm := &virtv1.VirtualMachine{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, vm))
	return vm
}

func TestStartStopCalls(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	srv := serve(t, e)
	ctx := context.Background()
	require.NoError(t, e.Client.Create(ctx, newVM(ns, "vm", virtv1.RunStrategyHalted)))

	code, msg := put(t, srv, ns, "virtualmachines", "vm", "start", `{"dryRun":["All"]}`)
	assert.Equal(t, http.StatusAccepted, code, msg)
	assert.Equal(t, virtv1.RunStrategyHalted, getVM(t, ns, "vm").Spec.EffectiveRunStrategy(), "dry run changes nothing")

	code, msg = put(t, srv, ns, "virtualmachines", "vm", "start", "")
	assert.Equal(t, http.StatusAccepted, code, msg)
	assert.Equal(t, virtv1.RunStrategyAlways, getVM(t, ns, "vm").Spec.EffectiveRunStrategy())

	code, msg = put(t, srv, ns, "virtualmachines", "vm", "start", "{}")
	assert.Equal(t, http.StatusConflict, code)
	assert.Contains(t, msg, `virtualmachines.kubevirt.io "vm"`)
	assert.Contains(t, msg, "does not support manual start requests")

	code, _ = put(t, srv, ns, "virtualmachines", "vm", "stop", "")
	assert.Equal(t, http.StatusAccepted, code)
	assert.Equal(t, virtv1.RunStrategyHalted, getVM(t, ns, "vm").Spec.EffectiveRunStrategy())
}

func TestStopPatchesTheGracePeriodAndRequestsTheStop(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	srv := serve(t, e)
	ctx := context.Background()
	require.NoError(t, e.Client.Create(ctx, newVM(ns, "manual", virtv1.RunStrategyManual)))
	vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "manual"},
		Spec: newVM(ns, "manual", virtv1.RunStrategyManual).Spec.Template.Spec}
	require.NoError(t, e.Client.Create(ctx, vmi))
	vmi.Status.Phase = virtv1.Running
	require.NoError(t, e.Client.Status().Update(ctx, vmi))

	code, msg := put(t, srv, ns, "virtualmachines", "manual", "stop", `{"gracePeriod":-1}`)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, msg, "gracePeriod")
	assert.Empty(t, getVM(t, ns, "manual").Status.StateChangeRequests, "nothing half-applied")

	code, msg = put(t, srv, ns, "virtualmachines", "manual", "stop", `{"gracePeriod":5}`)
	require.Equal(t, http.StatusAccepted, code, msg)
	got := &virtv1.VirtualMachineInstance{}
	require.NoError(t, e.Client.Get(ctx, client.ObjectKeyFromObject(vmi), got))
	assert.Equal(t, ptr.To(int64(5)), got.Spec.TerminationGracePeriodSeconds)
	reqs := getVM(t, ns, "manual").Status.StateChangeRequests
	require.Len(t, reqs, 1)
	assert.Equal(t, virtv1.StopRequest, reqs[0].Action)
	assert.Equal(t, vmi.UID, *reqs[0].UID)
}

func TestVersion(t *testing.T) {
	e := testenv.Require(t, env)
	srv := serve(t, e)
	resp, err := srv.Client().Get(srv.URL + prefix + "/version")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var info version.Info
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&info))
	assert.NotEmpty(t, info.GitVersion)
	assert.Equal(t, runtime.Version(), info.GoVersion)
}

func TestBadCallsGetAStatusNamingTheCause(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	srv := serve(t, e)
	require.NoError(t, e.Client.Create(context.Background(), newVM(ns, "halted", virtv1.RunStrategyHalted)))
	for _, tc := range []struct {
		name, vm, sub, body string
		code                int
		says                string
	}{
		{"unknown VM", "nope", "start", "", http.StatusNotFound, `virtualmachines.kubevirt.io "nope" not found`},
		{"malformed body", "halted", "start", "{", http.StatusBadRequest, "not valid"},
		{"unknown field", "halted", "start", `{"pause":true}`, http.StatusBadRequest, `unknown field "pause"`},
		{"stop a Halted VM", "halted", "stop", "", http.StatusConflict, "VM is not running"},
		{"restart a Halted VM", "halted", "restart", "", http.StatusConflict, "does not support manual restart requests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg := put(t, srv, ns, "virtualmachines", tc.vm, tc.sub, tc.body)
			assert.Equal(t, tc.code, code, msg)
			assert.Contains(t, msg, tc.says)
		})
	}
	assert.Equal(t, virtv1.RunStrategyHalted, getVM(t, ns, "halted").Spec.EffectiveRunStrategy(), "nothing changed")
}
