package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/scheme"
	restfake "k8s.io/client-go/rest/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	podvirtscheme "github.com/podvirt/podvirt/internal/scheme"
)

// fakeCluster is what the lifecycle commands talk to in these tests: a fake client holding the VM
// and its instance, and a fake REST client for the subresource calls that plays the controllers
// (a start makes a running instance, a stop removes it, a restart replaces it) unless inert.
type fakeCluster struct {
	t      *testing.T
	client client.WithWatch
	inert  bool

	mu    sync.Mutex
	calls []string
}

func newFakeCluster(t *testing.T, running bool) *fakeCluster {
	vm := &virtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "vm1"}}
	objs := []client.Object{vm}
	if running {
		objs = append(objs, &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "vm1", UID: "first"},
			Status: virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Running}})
	}
	c := fake.NewClientBuilder().WithScheme(podvirtscheme.New()).WithObjects(objs...).WithStatusSubresource(vm).Build()
	return &fakeCluster{t: t, client: c}
}

func (f *fakeCluster) handle(req *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(req.Body)
	f.mu.Lock()
	f.calls = append(f.calls, req.Method+" "+req.URL.Path+" "+string(body))
	f.mu.Unlock()
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "ns1", Name: "vm1"}
	if !f.inert && !strings.Contains(string(body), "dryRun") {
		vmi := &virtv1.VirtualMachineInstance{}
		switch sub := req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:]; sub {
		case "stop", "restart":
			if f.client.Get(ctx, key, vmi) == nil {
				require.NoError(f.t, f.client.Delete(ctx, vmi))
			}
			vm := &virtv1.VirtualMachine{}
			require.NoError(f.t, f.client.Get(ctx, key, vm))
			vm.Status.PrintableStatus = virtv1.VirtualMachineStatusStopped
			require.NoError(f.t, f.client.Status().Update(ctx, vm))
			if sub == "stop" {
				break
			}
			fallthrough
		case "start":
			require.NoError(f.t, f.client.Create(ctx, &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "vm1", UID: types.UID("new-" + sub)},
				Status: virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Running}}))
		}
	}
	return &http.Response{StatusCode: http.StatusAccepted, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

// run runs a lifecycle command against the fake cluster and returns its output.
func (f *fakeCluster) run(a action, set func(*LifecycleOptions)) (string, error) {
	var out bytes.Buffer
	o := &LifecycleOptions{IOStreams: genericiooptions.IOStreams{Out: &out, ErrOut: &out}, action: a, Name: "vm1", GracePeriod: -1, Timeout: 5 * time.Second}
	o.factory = func() (*clients, error) {
		rc := &restfake.RESTClient{NegotiatedSerializer: scheme.Codecs.WithoutConversion(), Client: restfake.CreateHTTPClient(f.handle)}
		return &clients{namespace: "ns1", client: f.client, rest: rc}, nil
	}
	if set != nil {
		set(o)
	}
	err := o.Run(context.Background())
	return out.String(), err
}

// The lifecycle commands with fake clients: the call KubeVirt's API expects (path, body), and with
// --wait the effect, or a timeout (exit 124) naming what was waited for.
func TestLifecycleCommandsWithFakeClients(t *testing.T) {
	const base = "PUT /apis/subresources.kubevirt.io/v1/namespaces/ns1/virtualmachines/vm1/"

	f := newFakeCluster(t, false)
	out, err := f.run(actionStart, func(o *LifecycleOptions) { o.Wait = true })
	require.NoError(t, err)
	assert.Contains(t, out, "VM vm1 was scheduled to start")
	assert.Equal(t, []string{base + `start {}`}, f.calls)

	f = newFakeCluster(t, true)
	out, err = f.run(actionRestart, func(o *LifecycleOptions) { o.Wait = true })
	require.NoError(t, err, out)
	vmi := &virtv1.VirtualMachineInstance{}
	require.NoError(t, f.client.Get(context.Background(), client.ObjectKey{Namespace: "ns1", Name: "vm1"}, vmi))
	assert.Equal(t, types.UID("new-restart"), vmi.UID, "--wait returned once the new instance ran")

	f = newFakeCluster(t, true)
	_, err = f.run(actionStop, func(o *LifecycleOptions) { o.Wait, o.Force, o.GracePeriod = true, true, 0 })
	require.NoError(t, err)
	assert.Equal(t, []string{base + `stop {"gracePeriod":0}`}, f.calls)

	f = newFakeCluster(t, true)
	out, err = f.run(actionStop, func(o *LifecycleOptions) { o.DryRun = true })
	require.NoError(t, err)
	assert.Contains(t, out, "(dry run)")
	assert.Equal(t, []string{base + `stop {"dryRun":["All"]}`}, f.calls)

	f = newFakeCluster(t, true)
	f.inert = true // nothing acts on the call
	_, err = f.run(actionStop, func(o *LifecycleOptions) { o.Wait, o.Timeout = true, 600*time.Millisecond })
	require.Error(t, err)
	assert.Equal(t, ExitTimeout, ExitCode(err))
	assert.Contains(t, err.Error(), "waiting for vm/vm1 to be Stopped")
}

// start --wait --for ready (agent) returns once the instance's Ready (AgentConnected) condition is
// True, saying meanwhile why it is not; --for refuses what it cannot wait for, naming it.
func TestStartWaitForReady(t *testing.T) {
	f := newFakeCluster(t, true)
	f.inert = true
	key := client.ObjectKey{Namespace: "ns1", Name: "vm1"}
	setReady := func(status metav1.ConditionStatus, reason, message string) {
		vmi := &virtv1.VirtualMachineInstance{}
		require.NoError(t, f.client.Get(context.Background(), key, vmi))
		vmi.Status.Conditions = []metav1.Condition{{Type: virtv1.VirtualMachineInstanceReady, Status: status, Reason: reason, Message: message}}
		require.NoError(t, f.client.Update(context.Background(), vmi))
	}
	setReady(metav1.ConditionFalse, "GuestNotReady", "the readiness probe has not passed")
	out, err := f.run(actionStart, func(o *LifecycleOptions) { o.Wait, o.For, o.Timeout = true, WaitForReady, 600*time.Millisecond })
	require.Error(t, err)
	assert.Equal(t, ExitTimeout, ExitCode(err))
	assert.Contains(t, err.Error(), "waiting for vm/vm1 to be Ready")
	assert.Contains(t, out, "not ready: GuestNotReady: the readiness probe has not passed")

	setReady(metav1.ConditionTrue, "Ready", "")
	out, err = f.run(actionStart, func(o *LifecycleOptions) { o.Wait, o.For = true, WaitForReady })
	require.NoError(t, err, out)
	assert.Contains(t, out, "instance Running, Ready")

	out, err = f.run(actionStart, func(o *LifecycleOptions) { o.Wait, o.For, o.Timeout = true, WaitForAgent, 600*time.Millisecond })
	assert.Equal(t, ExitTimeout, ExitCode(err), "no AgentConnected condition: %v", err)
	assert.Contains(t, out, "guest agent not connected")
	vmi := &virtv1.VirtualMachineInstance{}
	require.NoError(t, f.client.Get(context.Background(), key, vmi))
	vmi.Status.Conditions = append(vmi.Status.Conditions, metav1.Condition{Type: virtv1.VirtualMachineInstanceAgentConnected, Status: metav1.ConditionTrue, Reason: "GuestAgentConnected"})
	require.NoError(t, f.client.Update(context.Background(), vmi))
	out, err = f.run(actionStart, func(o *LifecycleOptions) { o.Wait, o.For = true, WaitForAgent })
	require.NoError(t, err, out)
	assert.Contains(t, out, "instance Running, AgentConnected")

	for args, want := range map[string]string{
		"start vm1 --for agent":         "--for needs --wait",
		"start vm1 --wait --for booted": `--for must be running, agent or ready, got "booted"`,
		"restart vm1 --for ready":       "--for needs --wait",
		"stop vm1 --wait --for ready":   "unknown flag: --for",
	} {
		_, err := run(t, "virtctl", strings.Fields(args)...)
		assert.ErrorContains(t, err, want, args)
	}
}
