package controllers_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/controllers"
	"github.com/podvirt/podvirt/internal/testenv"
)

func newReplicaSet(ns, name string, replicas int32) *virtv1.VirtualMachineInstanceReplicaSet {
	vm := newVM(ns, name, virtv1.RunStrategyManual)
	return &virtv1.VirtualMachineInstanceReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: virtv1.VirtualMachineInstanceReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: vm.Spec.Template,
		},
	}
}

func ownedInstances(t *testing.T, ns string, rs *virtv1.VirtualMachineInstanceReplicaSet) []virtv1.VirtualMachineInstance {
	t.Helper()
	var list virtv1.VirtualMachineInstanceList
	require.NoError(t, env.Client.List(context.Background(), &list, client.InNamespace(ns)))
	var owned []virtv1.VirtualMachineInstance
	for _, v := range list.Items {
		if ref := metav1.GetControllerOf(&v); ref != nil && ref.UID == rs.UID && v.DeletionTimestamp == nil {
			owned = append(owned, v)
		}
	}
	return owned
}

func setReplicas(t *testing.T, rs *virtv1.VirtualMachineInstanceReplicaSet, n int32, paused bool) {
	t.Helper()
	cur, _ := get(t, &virtv1.VirtualMachineInstanceReplicaSet{}, rs.Namespace, rs.Name)
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Replicas = ptr.To(n)
	cur.Spec.Paused = paused
	require.NoError(t, env.Client.Patch(context.Background(), cur, patch))
}

func TestReplicaSetScalesAndPauses(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	startControllers(t, ns)
	rs := newReplicaSet(ns, "web", 0)
	require.NoError(t, e.Client.Create(context.Background(), rs))

	counts := func(want int32) func() bool {
		return func() bool {
			cur, _ := get(t, &virtv1.VirtualMachineInstanceReplicaSet{}, ns, "web")
			return len(ownedInstances(t, ns, rs)) == int(want) && cur.Status.Replicas == want && cur.Status.LabelSelector == "app=web"
		}
	}
	eventually(t, "0 replicas", counts(0))
	setReplicas(t, rs, 5, false)
	eventually(t, "5 replicas", counts(5))
	setReplicas(t, rs, 2, false)
	eventually(t, "2 replicas", counts(2))

	setReplicas(t, rs, 4, true)
	eventually(t, "Paused condition", func() bool {
		cur, _ := get(t, &virtv1.VirtualMachineInstanceReplicaSet{}, ns, "web")
		return condition(cur.Status.Conditions, virtv1.VirtualMachineInstanceReplicaSetPaused).Status == metav1.ConditionTrue
	})
	assert.Never(t, func() bool { return len(ownedInstances(t, ns, rs)) != 2 }, 2*time.Second, 100*time.Millisecond, "a paused replica set does not scale")
	setReplicas(t, rs, 4, false)
	eventually(t, "4 replicas after unpause", counts(4))

	// An instance that stops matching is released; a matching orphan is adopted.
	victim := ownedInstances(t, ns, rs)[0]
	patch := client.MergeFrom(victim.DeepCopy())
	victim.Labels["app"] = "elsewhere"
	require.NoError(t, e.Client.Patch(context.Background(), &victim, patch))
	eventually(t, "released and replaced", func() bool {
		v := instance(t, ns, victim.Name)
		return metav1.GetControllerOf(v) == nil && len(ownedInstances(t, ns, rs)) == 4
	})
}

func TestStaleHeartbeatFailsInstancesOnTheNode(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	// The controllers' clock stands still unless the test steps it, so "fresh" stays fresh however
	// slow the machine is. Leases are read in ns (the test's Podvirt namespace).
	clk := clocktesting.NewFakePassiveClock(time.Now())
	startControllers(t, ns, func(o *controllers.Options) { o.Clock = clk })
	ctx := context.Background()
	running := func(vmName, node string) *virtv1.VirtualMachineInstance {
		require.NoError(t, e.Client.Create(ctx, newVM(ns, vmName, virtv1.RunStrategyAlways)))
		var v *virtv1.VirtualMachineInstance
		eventually(t, vmName+" started", func() bool { v = instance(t, ns, vmName); return v != nil })
		runPod(t, v, node)
		eventually(t, vmName+" scheduled", func() bool { return instance(t, ns, vmName).Status.Phase == virtv1.Scheduled })
		setInstancePhase(t, ns, vmName, virtv1.Running)
		return v
	}
	healthy, lost := running("vm-ok", "node-ok"), running("vm-lost", "node-lost")
	heartbeatAt := func(node string, renewed time.Time) *coordinationv1.Lease {
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: heartbeatv1.LeaseName(node)},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("virt-handler-x"), RenewTime: ptr.To(metav1.NewMicroTime(renewed)), LeaseDurationSeconds: ptr.To(int32(40))},
		}
		require.NoError(t, e.Client.Create(ctx, lease))
		return lease
	}
	freshLease := heartbeatAt("node-ok", clk.Now())
	lostLease := heartbeatAt("node-lost", clk.Now().Add(-time.Minute))
	// The controller judges a heartbeat by when it saw it renewed, by its own clock (the renew time a
	// minute old says nothing by itself): time passes, node-ok's agent renews, node-lost's does not.
	update := func(lease *coordinationv1.Lease, change func(*coordinationv1.Lease)) {
		patch := client.MergeFrom(lease.DeepCopy())
		change(lease)
		require.NoError(t, e.Client.Patch(ctx, lease, patch))
	}
	eventually(t, "vm-lost: NodeUnresponsive, then replaced", func() bool {
		clk.SetTime(clk.Now().Add(2 * time.Second))
		update(freshLease, func(l *coordinationv1.Lease) { l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(clk.Now())) })
		update(lostLease, func(l *coordinationv1.Lease) { l.Labels = map[string]string{"step": clk.Now().Format("150405")} }) // an event, no renewal
		kubeletDeletes(t, ns)
		v := instance(t, ns, "vm-lost")
		return v != nil && v.UID != lost.UID
	})
	v := instance(t, ns, "vm-ok")
	require.Equal(t, healthy.UID, v.UID, "a fresh heartbeat fences nothing")
	require.Equal(t, virtv1.Running, v.Status.Phase)

	// Time passes without a renewal: the same node's heartbeat is now stale.
	clk.SetTime(clk.Now().Add(time.Minute))
	patch := client.MergeFrom(freshLease.DeepCopy())
	freshLease.Labels = map[string]string{"touched": "yes"} // an event, so the controller looks again
	require.NoError(t, e.Client.Patch(ctx, freshLease, patch))
	eventually(t, "vm-ok: NodeUnresponsive once its heartbeat went stale", func() bool {
		v := instance(t, ns, "vm-ok")
		return v != nil && (v.UID != healthy.UID || v.Status.Reason == virtv1.ReasonNodeUnresponsive)
	})
}
