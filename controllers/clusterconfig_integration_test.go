package controllers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/controllers"
	"github.com/podvirt/podvirt/internal/testenv"
)

// requestsKVM reports whether the instance's launcher Pod asks for /dev/kvm.
func requestsKVM(t *testing.T, v *virtv1.VirtualMachineInstance) bool {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, "launcher pod of "+v.Name, func() bool { pod = launcherPod(t, v); return pod != nil })
	return podRequestsKVM(pod)
}

func podRequestsKVM(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.Containers {
		if _, ok := c.Resources.Limits[corev1.ResourceName(launcherv1.KVMResource)]; ok {
			return true
		}
	}
	return false
}

// The KubeVirt object in Podvirt's namespace configures virt-controller while it runs: its
// useEmulation renders launcher Pods without /dev/kvm, a migration begins with its bandwidth and
// completion timeout recorded in the instance's migration state, and parallelMigrationsPerCluster
// holds a second migration back until the first ends.
func TestKubeVirtObjectConfiguresTheControllers(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	startControllers(t, ns, func(o *controllers.Options) { o.Launcher.UseEmulation = false })
	ctx := context.Background()

	first := runningInstance(t, ns, "kvm", "node-a", nil)
	assert.True(t, requestsKVM(t, first), "without a KubeVirt object the flag (no emulation) holds")

	kv := &virtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubevirt"}, Spec: virtv1.KubeVirtSpec{
		Configuration: virtv1.KubeVirtConfiguration{
			DeveloperConfiguration: &virtv1.DeveloperConfiguration{UseEmulation: true},
			MigrationConfiguration: &virtv1.MigrationConfiguration{BandwidthPerMigration: ptr.To(resource.MustParse("64Mi")),
				CompletionTimeoutPerGiB: ptr.To[int64](20), ParallelMigrationsPerCluster: ptr.To[uint32](1)},
		}}}
	require.NoError(t, e.Client.Create(ctx, kv))
	// The cache sees the object shortly after: the next instance is rendered with it.
	var second *virtv1.VirtualMachineInstance
	tries := 0
	eventually(t, "an instance rendered under emulation", func() bool {
		tries++
		name := fmt.Sprintf("emu-%d", tries)
		v := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: newVM(ns, name, virtv1.RunStrategyAlways).Spec.Template.Spec}
		require.NoError(t, e.Client.Create(ctx, v))
		if requestsKVM(t, v) {
			return false
		}
		second = v
		return true
	})
	runPod(t, second, "node-a")
	eventually(t, "Scheduled", func() bool {
		v, _ := get(t, &virtv1.VirtualMachineInstance{}, ns, second.Name)
		return v.Status.Phase == virtv1.Scheduled
	})
	agentWrites(t, ns, second.Name, func(st *virtv1.VirtualMachineInstanceStatus) { st.Phase = virtv1.Running })

	// The first instance runs with KVM, as its node agent says.
	agentWrites(t, ns, first.Name, func(st *virtv1.VirtualMachineInstanceStatus) {
		st.Conditions = append(st.Conditions, metav1.Condition{Type: virtv1.VirtualMachineInstanceSoftwareEmulation,
			Status: metav1.ConditionFalse, Reason: "KVMAvailable", LastTransitionTime: metav1.Now()})
	})
	require.NoError(t, e.Client.Create(ctx, newMigration(ns, "one", first.Name)))
	var ms *virtv1.VirtualMachineInstanceMigrationState
	eventually(t, "the first migration recorded", func() bool {
		v, _ := get(t, &virtv1.VirtualMachineInstance{}, ns, first.Name)
		ms = v.Status.MigrationState
		return ms != nil && migrationPhase(t, ns, "one") == virtv1.MigrationScheduling
	})
	require.NotNil(t, ms.MigrationConfiguration)
	assert.Equal(t, "64Mi", ms.MigrationConfiguration.BandwidthPerMigration.String())
	assert.Equal(t, int64(20), *ms.MigrationConfiguration.CompletionTimeoutPerGiB)
	target, _ := get(t, &corev1.Pod{}, ns, ms.TargetPod)
	assert.True(t, podRequestsKVM(target), "the target of an instance that runs with KVM asks for KVM, whatever the cluster now says")

	require.NoError(t, e.Client.Create(ctx, newMigration(ns, "two", second.Name)))
	require.Never(t, func() bool {
		v, _ := get(t, &virtv1.VirtualMachineInstance{}, ns, second.Name)
		return v.Status.MigrationState != nil
	}, 2*time.Second, 100*time.Millisecond, "a second migration began while parallelMigrationsPerCluster is 1")
	assert.Equal(t, virtv1.MigrationPending, migrationPhase(t, ns, "two"))

	now := metav1.Now()
	agentWrites(t, ns, first.Name, func(st *virtv1.VirtualMachineInstanceStatus) {
		st.MigrationState.Failed, st.MigrationState.FailureReason, st.MigrationState.EndTimestamp = true, "test", &now
	})
	eventually(t, "the second migration begins once the first ended", func() bool {
		v, _ := get(t, &virtv1.VirtualMachineInstance{}, ns, second.Name)
		return v.Status.MigrationState != nil
	})
}

// parallelOutboundMigrationsPerNode holds a migration out of a node back while another migration
// out of that node runs; a migration out of another node begins meanwhile.
func TestParallelOutboundMigrationsPerNode(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	startControllers(t, ns)
	ctx := context.Background()
	kv := &virtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubevirt"}, Spec: virtv1.KubeVirtSpec{
		Configuration: virtv1.KubeVirtConfiguration{MigrationConfiguration: &virtv1.MigrationConfiguration{
			ParallelOutboundMigrationsPerNode: ptr.To[uint32](1)}}}}
	require.NoError(t, e.Client.Create(ctx, kv))
	a1 := runningInstance(t, ns, "a1", "node-a", nil)
	a2 := runningInstance(t, ns, "a2", "node-a", nil)
	b1 := runningInstance(t, ns, "b1", "node-b", nil)
	begun := func(name string) bool {
		v, _ := get(t, &virtv1.VirtualMachineInstance{}, ns, name)
		return v.Status.MigrationState != nil
	}
	// The cache sees the object shortly after: until the first migration records the setting, try again.
	tries := 0
	eventually(t, "a migration begun under the per-node cap", func() bool {
		tries++
		name := fmt.Sprintf("a1-%d", tries)
		m := newMigration(ns, name, a1.Name)
		require.NoError(t, e.Client.Create(ctx, m))
		var v *virtv1.VirtualMachineInstance
		eventually(t, "the migration of a1 begins", func() bool {
			v, _ = get(t, &virtv1.VirtualMachineInstance{}, ns, a1.Name)
			return v.Status.MigrationState != nil && v.Status.MigrationState.MigrationUID == string(m.UID)
		})
		if mc := v.Status.MigrationState.MigrationConfiguration; mc != nil && mc.ParallelOutboundMigrationsPerNode != nil && *mc.ParallelOutboundMigrationsPerNode == 1 {
			return true
		}
		now := metav1.Now()
		agentWrites(t, ns, a1.Name, func(st *virtv1.VirtualMachineInstanceStatus) {
			st.MigrationState.Failed, st.MigrationState.FailureReason, st.MigrationState.EndTimestamp = true, "test", &now
		})
		eventually(t, "the migration ended", func() bool { return migrationPhase(t, ns, name) == virtv1.MigrationFailed })
		return false
	})

	require.NoError(t, e.Client.Create(ctx, newMigration(ns, "a2", a2.Name)))
	require.NoError(t, e.Client.Create(ctx, newMigration(ns, "b1", b1.Name)))
	eventually(t, "the migration out of node-b begins", func() bool { return begun(b1.Name) })
	require.Never(t, func() bool { return begun(a2.Name) }, 2*time.Second, 100*time.Millisecond,
		"a second migration out of node-a began while parallelOutboundMigrationsPerNode is 1")
	assert.Equal(t, virtv1.MigrationPending, migrationPhase(t, ns, "a2"))

	now := metav1.Now()
	agentWrites(t, ns, a1.Name, func(st *virtv1.VirtualMachineInstanceStatus) {
		st.MigrationState.Failed, st.MigrationState.FailureReason, st.MigrationState.EndTimestamp = true, "test", &now
	})
	eventually(t, "the second migration out of node-a begins once the first ended", func() bool { return begun(a2.Name) })
}
