package nodeagent_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/testenv"
)

// readManifests decodes a multi-document YAML file of install/node-agent.
func readManifests(t *testing.T, name string) []*unstructured.Unstructured {
	t.Helper()
	return readManifestsAt(t, "node-agent", name)
}

// readManifestsAt decodes a multi-document YAML file of install/dir.
func readManifestsAt(t *testing.T, dir, name string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(testenv.RepoPath("install", dir, name))
	require.NoError(t, err)
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// TestShippedRBACIsEnough runs the agent as its ServiceAccount (with its node's token claim), with
// exactly the RBAC and policy in install/node-agent, through a whole guest life: anything missing
// there fails here.
func TestShippedRBACIsEnough(t *testing.T) {
	e := testenv.Require(t, env)
	ctx := context.Background()
	ensureNamespace(t, heartbeatv1.Namespace)
	applyShipped(t, "rbac.yaml", "policy.yaml")
	n := newNode(t, heartbeatv1.Namespace)
	asAgent := agentConfig(e, n.name)

	// The impersonation is real: the ServiceAccount may not do what the RBAC does not grant.
	sa, err := client.New(asAgent, client.Options{Scheme: e.Scheme})
	require.NoError(t, err)
	err = sa.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "x"}})
	require.True(t, apierrors.IsForbidden(err), "deleting pods must be forbidden, got %v", err)

	ns := e.Namespace(t)
	nodeObj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name}}
	require.NoError(t, e.Client.Create(ctx, nodeObj))
	t.Cleanup(func() { _ = e.Client.Delete(ctx, nodeObj) })
	a := n.startAs(t, asAgent)
	g := n.scheduleGuest(t, ns, "vm-rbac", nil)

	g.waitPhase(t, virtv1.Running)
	g.waitEvent(t, "Started")
	assert.Equal(t, http.StatusOK, put(t, "http://"+a.addr+"/v1/namespaces/"+ns+"/virtualmachineinstances/vm-rbac/pause"))
	eventually(t, "Paused=True", func() bool {
		return meta.IsStatusConditionTrue(g.get(t).Status.Conditions, virtv1.VirtualMachineInstancePaused)
	})
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: heartbeatv1.Namespace, Name: heartbeatv1.LeaseName(n.name)}
	eventually(t, "the lease is renewed", func() bool {
		return e.Client.Get(ctx, key, lease) == nil && lease.Spec.RenewTime.After(lease.Spec.AcquireTime.Time)
	})
	require.Len(t, lease.OwnerReferences, 1, "the agent may read its Node")
	require.NoError(t, a.Heartbeat.Check(nil))
	eventually(t, "the agent lists its peers (their count on its lease)", func() bool {
		return e.Client.Get(ctx, key, lease) == nil && lease.Annotations[heartbeatv1.AnnotationPeers] != ""
	})
}

// TestShippedDaemonSetIsValid creates the DaemonSet (server-side dry run) so the apiserver validates it.
func TestShippedDaemonSetIsValid(t *testing.T) {
	e := testenv.Require(t, env)
	ensureNamespace(t, heartbeatv1.Namespace)
	objs := readManifests(t, "daemonset.yaml")
	require.Len(t, objs, 1)
	ds := objs[0]
	assert.Equal(t, "DaemonSet", ds.GetKind())
	require.NoError(t, e.Client.Create(context.Background(), ds, client.DryRunAll))
	containers, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "containers")
	require.Len(t, containers, 2, "the agent and the qemu capabilities probe")
	c := containers[0].(map[string]any)
	assert.Equal(t, "docker.io/podvirt/virt-handler:dev", c["image"])
	assert.Equal(t, "IfNotPresent", c["imagePullPolicy"])
	assert.Contains(t, c["args"], "--listen=$(NODE_IP):8186", "the unauthenticated server binds the node's IP only")

	// qemu's capabilities are probed with the launcher's image and user, or libvirt rejects them.
	probe := containers[1].(map[string]any)
	assert.Equal(t, "qemu-capabilities", probe["name"])
	controller := readManifestsAt(t, "controller", "deployment.yaml")
	args, _, _ := unstructured.NestedSlice(controller[0].Object, "spec", "template", "spec", "containers")
	assert.Contains(t, args[0].(map[string]any)["args"], "--launcher-image="+probe["image"].(string), "the probe runs the image launchers run")
	for _, f := range []string{"runAsUser", "runAsGroup"} {
		id, _, _ := unstructured.NestedInt64(probe, "securityContext", f)
		assert.Equal(t, int64(launcherv1.LauncherUID), id, f)
	}
	_, hasInit := ds.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["initContainers"]
	assert.False(t, hasInit, "nothing may keep the agent from starting")
}
