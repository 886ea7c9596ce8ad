package nodeagent_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/testenv"
)

// nodeClaim is the extra the kubelet's ServiceAccount tokens carry: the node of the bound Pod.
const nodeClaim = agentv1.NodeNameExtra

// applyShipped creates the objects of install/node-agent files (already there is fine).
func applyShipped(t *testing.T, files ...string) {
	t.Helper()
	ctx := context.Background()
	for _, f := range files {
		for _, obj := range readManifests(t, f) {
			err := env.Client.Create(ctx, obj)
			if !apierrors.IsAlreadyExists(err) {
				require.NoError(t, err, "%s %s", obj.GetKind(), obj.GetName())
			}
			t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })
		}
	}
}

// agentConfig impersonates the agent's ServiceAccount with a token naming node ("": none).
func agentConfig(e *testenv.Env, node string) *rest.Config {
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:podvirt:virt-handler"}
	if node != "" {
		cfg.Impersonate.Extra = map[string][]string{nodeClaim: {node}}
	}
	return cfg
}

// Root on one node holds its agent's token: the shipped policy lets that token write only its own
// node's instances (and, of an instance migrating there, the migration state) and its own
// heartbeat lease — not fail or move another node's VMs, receive their memory by writing a
// targetNodeAddress, or take over other nodes' heartbeats or virt-controller's leader lease.
func TestShippedPolicyScopesTheAgentToItsNode(t *testing.T) {
	e := testenv.Require(t, env)
	ctx := context.Background()
	ensureNamespace(t, heartbeatv1.Namespace)
	applyShipped(t, "rbac.yaml", "policy.yaml")
	ns := e.Namespace(t)
	agent := func(node string) client.Client {
		c, err := client.New(agentConfig(e, node), client.Options{Scheme: e.Scheme})
		require.NoError(t, err)
		return c
	}
	a, noClaim := agent("node-a"), agent("")
	instance := func(name, node string, ms *virtv1.VirtualMachineInstanceMigrationState) *virtv1.VirtualMachineInstance {
		vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: vmiSpec()}
		require.NoError(t, e.Client.Create(ctx, vmi))
		patch := client.MergeFrom(vmi.DeepCopy())
		vmi.Status.Phase, vmi.Status.NodeName, vmi.Status.LauncherPod, vmi.Status.MigrationState = virtv1.Running, node, "virt-launcher-"+name, ms
		require.NoError(t, e.Client.Status().Patch(ctx, vmi, patch))
		return vmi
	}
	// write changes the instance's status as c: fresh from the apiserver, under its resourceVersion.
	write := func(c client.Client, vmi *virtv1.VirtualMachineInstance, change func(*virtv1.VirtualMachineInstanceStatus)) error {
		cur := &virtv1.VirtualMachineInstance{}
		require.NoError(t, e.Client.Get(ctx, client.ObjectKeyFromObject(vmi), cur))
		patch := client.MergeFromWithOptions(cur.DeepCopy(), client.MergeFromWithOptimisticLock{})
		change(&cur.Status)
		return c.Status().Patch(ctx, cur, patch)
	}
	fail := func(st *virtv1.VirtualMachineInstanceStatus) { st.Phase, st.Reason = virtv1.Failed, "Forged" }
	own := instance("own", "node-a", nil)
	other := instance("other", "node-b", nil)
	incoming := instance("incoming", "node-b", &virtv1.VirtualMachineInstanceMigrationState{
		MigrationUID: "m-1", SourceNode: "node-b", TargetNode: "node-a", TargetPod: "virt-launcher-incoming-x"})
	outgoing := instance("outgoing", "node-b", &virtv1.VirtualMachineInstanceMigrationState{
		MigrationUID: "m-2", SourceNode: "node-b", TargetNode: "node-c", TargetPod: "virt-launcher-outgoing-x"})

	eventually(t, "the policy is in force", func() bool {
		return apierrors.IsForbidden(write(a, other, fail))
	})
	require.NoError(t, write(a, own, func(st *virtv1.VirtualMachineInstanceStatus) { st.Reason = "Observed" }), "its own node's instance")
	require.NoError(t, write(a, incoming, func(st *virtv1.VirtualMachineInstanceStatus) {
		now := metav1.Now()
		st.MigrationState.TargetNodeAddress = "10.0.0.1:8186"
		st.MigrationState.TargetNodeDomainDetected, st.MigrationState.TargetNodeDomainReadyTimestamp = true, &now
	}), "what the target reports of an instance migrating to its node")
	for name, c := range map[string]struct {
		c      client.Client
		vmi    *virtv1.VirtualMachineInstance
		change func(*virtv1.VirtualMachineInstanceStatus)
	}{
		"another node's instance":                {a, other, fail},
		"its memory, by a forged target address": {a, outgoing, func(st *virtv1.VirtualMachineInstanceStatus) { st.MigrationState.TargetNodeAddress = "10.0.0.66:8186" }},
		"an incoming instance's phase":           {a, incoming, fail},
		"an incoming instance's node":            {a, incoming, func(st *virtv1.VirtualMachineInstanceStatus) { st.NodeName = "node-a" }},
		"an incoming migration's target":         {a, incoming, func(st *virtv1.VirtualMachineInstanceStatus) { st.MigrationState.TargetNode = "node-c" }},
		"an incoming migration's completion":     {a, incoming, func(st *virtv1.VirtualMachineInstanceStatus) { st.MigrationState.Completed = true }},
		"an incoming migration's failure":        {a, incoming, func(st *virtv1.VirtualMachineInstanceStatus) { st.MigrationState.Failed = true }},
		"an incoming migration's source Pod":     {a, incoming, func(st *virtv1.VirtualMachineInstanceStatus) { st.MigrationState.SourcePod = "elsewhere" }},
		"a token naming no node":                 {noClaim, own, fail},
	} {
		err := write(c.c, c.vmi, c.change)
		require.Truef(t, apierrors.IsForbidden(err), "%s: want Forbidden, got %v", name, err)
	}

	lease := func(name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: heartbeatv1.Namespace, Name: name}}
	}
	require.NoError(t, a.Create(ctx, lease(heartbeatv1.LeaseName("node-a"))), "its own heartbeat")
	t.Cleanup(func() { _ = e.Client.Delete(ctx, lease(heartbeatv1.LeaseName("node-a"))) })
	err := a.Create(ctx, lease(heartbeatv1.LeaseName("node-b")))
	require.Truef(t, apierrors.IsForbidden(err), "another node's heartbeat: %v", err)
	leader := lease("podvirt-virt-controller-leader")
	require.NoError(t, e.Client.Create(ctx, leader))
	t.Cleanup(func() { _ = e.Client.Delete(ctx, leader) })
	require.NoError(t, a.Get(ctx, client.ObjectKeyFromObject(leader), leader))
	leader.Spec.HolderIdentity = ptr.To("node-a-agent")
	err = a.Update(ctx, leader)
	require.Truef(t, apierrors.IsForbidden(err), "the leader lease: %v", err)
}

// The heartbeats have their own API priority: the apiserver classifies the agent's lease requests
// under the shipped FlowSchema (node-high, as the kubelets' own leases), as its response headers say.
func TestShippedFlowSchemaPrioritisesHeartbeats(t *testing.T) {
	e := testenv.Require(t, env)
	ctx := context.Background()
	ensureNamespace(t, heartbeatv1.Namespace)
	applyShipped(t, "rbac.yaml", "policy.yaml", "flowschema.yaml")
	fs := &flowcontrolv1.FlowSchema{}
	require.NoError(t, e.Client.Get(ctx, client.ObjectKey{Name: "podvirt-heartbeats"}, fs))
	hc, err := rest.HTTPClientFor(agentConfig(e, "node-a"))
	require.NoError(t, err)
	url := e.Config.Host + "/apis/coordination.k8s.io/v1/namespaces/" + heartbeatv1.Namespace + "/leases/" + heartbeatv1.LeaseName("node-a")
	eventually(t, "the agent's lease requests are classified under podvirt-heartbeats", func() bool {
		resp, err := hc.Get(url)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) == string(fs.UID)
	})
}
