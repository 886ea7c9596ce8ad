package controllers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/controllers/migration"
	"github.com/podvirt/podvirt/controllers/podtemplate"
	"github.com/podvirt/podvirt/controllers/vmi"
	"github.com/podvirt/podvirt/internal/testenv"
)

// runningInstance creates an instance from newVM's template and plays the scheduler, kubelet and
// node agent until it runs on node.
func runningInstance(t *testing.T, ns, name, node string, mutate func(*virtv1.VirtualMachineInstanceSpec)) *virtv1.VirtualMachineInstance {
	t.Helper()
	v := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: newVM(ns, name, virtv1.RunStrategyAlways).Spec.Template.Spec}
	if mutate != nil {
		mutate(&v.Spec)
	}
	require.NoError(t, env.Client.Create(context.Background(), v))
	runPod(t, v, node)
	eventually(t, "Scheduled", func() bool {
		v, _ = get(t, &virtv1.VirtualMachineInstance{}, ns, name)
		return v.Status.Phase == virtv1.Scheduled
	})
	agentWrites(t, ns, name, func(st *virtv1.VirtualMachineInstanceStatus) { st.Phase = virtv1.Running })
	v, _ = get(t, &virtv1.VirtualMachineInstance{}, ns, name)
	return v
}

// agentWrites plays a node agent writing the instance's status.
func agentWrites(t *testing.T, ns, name string, change func(*virtv1.VirtualMachineInstanceStatus)) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		v, _ := get(t, &virtv1.VirtualMachineInstance{}, ns, name)
		change(&v.Status)
		return env.Client.Status().Update(context.Background(), v)
	}))
}

func migrationPhase(t *testing.T, ns, name string) virtv1.VirtualMachineInstanceMigrationPhase {
	m, _ := get(t, &virtv1.VirtualMachineInstanceMigration{}, ns, name)
	return m.Status.Phase
}

func newMigration(ns, name, vmiName string) *virtv1.VirtualMachineInstanceMigration {
	return &virtv1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: virtv1.VirtualMachineInstanceMigrationSpec{VMIName: vmiName}}
}

// The migration controller against the real apiserver, the agents played by the test: the
// migration is recorded in the instance, a target Pod that avoids the source node is created, its
// phases follow the Pod and the agents, the source Pod completing does not end the instance, and
// the hand-over ends the migration Succeeded with the instance still running.
func TestMigrationMovesTheInstance(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	startControllers(t, ns)
	ctx := context.Background()
	src := runningInstance(t, ns, "m", "node-a", nil)
	assert.Equal(t, metav1.ConditionTrue, condition(src.Status.Conditions, virtv1.VirtualMachineInstanceLiveMigratable).Status)

	mig := newMigration(ns, "mig", "m")
	require.NoError(t, e.Client.Create(ctx, mig))
	var ms *virtv1.VirtualMachineInstanceMigrationState
	eventually(t, "migration recorded in the instance", func() bool {
		v, _ := get(t, &virtv1.VirtualMachineInstance{}, ns, "m")
		ms = v.Status.MigrationState
		return ms != nil && ms.MigrationUID == string(mig.UID)
	})
	assert.Equal(t, "node-a", ms.SourceNode)
	assert.Equal(t, podtemplate.PodName(src), ms.SourcePod)
	assert.Equal(t, podtemplate.TargetPodName(src, string(mig.UID)), ms.TargetPod)

	var target *corev1.Pod
	eventually(t, "target pod created, Scheduling", func() bool {
		var ok bool
		target, ok = get(t, &corev1.Pod{}, ns, ms.TargetPod)
		return ok && migrationPhase(t, ns, "mig") == virtv1.MigrationScheduling
	})
	assert.Equal(t, string(mig.UID), target.Labels[launcherv1.MigrationJobLabel])
	terms := target.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	require.Len(t, terms, 1)
	assert.Contains(t, terms[0].MatchExpressions, corev1.NodeSelectorRequirement{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"node-a"}})

	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: target.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-b"}}
	require.NoError(t, e.Client.SubResource("binding").Create(ctx, target, binding))
	target, _ = get(t, &corev1.Pod{}, ns, target.Name)
	target.Status.Phase = corev1.PodRunning
	require.NoError(t, e.Client.Status().Update(ctx, target))
	eventually(t, "PreparingTarget, target node recorded", func() bool {
		v, _ := get(t, &virtv1.VirtualMachineInstance{}, ns, "m")
		return migrationPhase(t, ns, "mig") == virtv1.MigrationPreparingTarget && v.Status.MigrationState.TargetNode == "node-b"
	})

	agentWrites(t, ns, "m", func(st *virtv1.VirtualMachineInstanceStatus) { st.MigrationState.TargetNodeAddress = "10.0.0.2:8186" })
	eventually(t, "TargetReady", func() bool { return migrationPhase(t, ns, "mig") == virtv1.MigrationTargetReady })
	now := metav1.Now()
	agentWrites(t, ns, "m", func(st *virtv1.VirtualMachineInstanceStatus) { st.MigrationState.StartTimestamp = &now })
	eventually(t, "Running", func() bool { return migrationPhase(t, ns, "mig") == virtv1.MigrationRunning })

	// The guest has moved: the source launcher exits 0 before the source's agent hands over.
	source := launcherPod(t, src)
	source.Status.Phase = corev1.PodSucceeded
	require.NoError(t, e.Client.Status().Update(ctx, source))
	require.Never(t, func() bool {
		v, _ := get(t, &virtv1.VirtualMachineInstance{}, ns, "m")
		return v.Status.Phase != virtv1.Running
	}, 2*time.Second, 100*time.Millisecond, "the source pod's completion ended the instance")

	agentWrites(t, ns, "m", func(st *virtv1.VirtualMachineInstanceStatus) {
		st.MigrationState.Completed, st.MigrationState.EndTimestamp = true, &now
		st.NodeName, st.LauncherPod = "node-b", target.Name
	})
	eventually(t, "Succeeded", func() bool { return migrationPhase(t, ns, "mig") == virtv1.MigrationSucceeded })
	v, _ := get(t, &virtv1.VirtualMachineInstance{}, ns, "m")
	assert.Equal(t, virtv1.Running, v.Status.Phase)
	assert.Equal(t, target.Name, v.Status.LauncherPod)

	// Deleting the finished migration leaves the Pod the instance now runs in alone.
	m, _ := get(t, &virtv1.VirtualMachineInstanceMigration{}, ns, "mig")
	require.NoError(t, e.Client.Delete(ctx, m))
	eventually(t, "migration gone", func() bool {
		_, exists := get(t, &virtv1.VirtualMachineInstanceMigration{}, ns, "mig")
		return !exists
	})
	p, ok := get(t, &corev1.Pod{}, ns, target.Name)
	assert.True(t, ok && p.DeletionTimestamp == nil, "the instance's launcher Pod was deleted with its migration")
}

// A target Pod that ends fails the migration and records why in the instance, which runs on; an
// instance that cannot move fails its migration at once, naming the volume, and gets no target Pod.
func TestMigrationFailures(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	startControllers(t, ns)
	ctx := context.Background()
	runningInstance(t, ns, "m", "node-a", nil)
	require.NoError(t, e.Client.Create(ctx, newMigration(ns, "mig", "m")))
	var target *corev1.Pod
	eventually(t, "target pod created", func() bool {
		v, _ := get(t, &virtv1.VirtualMachineInstance{}, ns, "m")
		if v.Status.MigrationState == nil {
			return false
		}
		var ok bool
		target, ok = get(t, &corev1.Pod{}, ns, v.Status.MigrationState.TargetPod)
		return ok
	})
	// Once the source's agent has started the transfer, only it ends the migration: a target Pod
	// that fails asks it to abort.
	now := metav1.Now()
	agentWrites(t, ns, "m", func(st *virtv1.VirtualMachineInstanceStatus) {
		st.MigrationState.TargetNodeAddress, st.MigrationState.StartTimestamp = "10.0.0.2:8186", &now
	})
	target.Status.Phase = corev1.PodFailed
	require.NoError(t, e.Client.Status().Update(ctx, target))
	eventually(t, "abort requested", func() bool {
		v, _ := get(t, &virtv1.VirtualMachineInstance{}, ns, "m")
		return v.Status.MigrationState.AbortRequested && !v.Status.MigrationState.Failed
	})
	assert.NotEqual(t, virtv1.MigrationFailed, migrationPhase(t, ns, "mig"))
	agentWrites(t, ns, "m", func(st *virtv1.VirtualMachineInstanceStatus) {
		st.MigrationState.Failed, st.MigrationState.FailureReason = true, "the target Pod "+target.Name+" ended (Failed)"
	})
	eventually(t, "Failed", func() bool { return migrationPhase(t, ns, "mig") == virtv1.MigrationFailed })
	v, _ := get(t, &virtv1.VirtualMachineInstance{}, ns, "m")
	assert.True(t, v.Status.MigrationState.Failed)
	assert.Contains(t, v.Status.MigrationState.FailureReason, "the target Pod "+target.Name+" ended")
	assert.Equal(t, virtv1.Running, v.Status.Phase)
	assert.Equal(t, "node-a", v.Status.NodeName)

	runningInstance(t, ns, "disk", "node-a", func(s *virtv1.VirtualMachineInstanceSpec) {
		s.Volumes[0].VolumeSource = virtv1.VolumeSource{PersistentVolumeClaim: &virtv1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}
	})
	v, _ = get(t, &virtv1.VirtualMachineInstance{}, ns, "disk")
	c := condition(v.Status.Conditions, virtv1.VirtualMachineInstanceLiveMigratable)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, vmi.ReasonDisksNotLiveMigratable, c.Reason)
	assert.Contains(t, c.Message, `volume "root" is a persistentVolumeClaim`)
	require.NoError(t, e.Client.Create(ctx, newMigration(ns, "mig2", "disk")))
	eventually(t, "refused migration Failed", func() bool { return migrationPhase(t, ns, "mig2") == virtv1.MigrationFailed })
	v, _ = get(t, &virtv1.VirtualMachineInstance{}, ns, "disk")
	assert.Nil(t, v.Status.MigrationState, "no migration recorded for an instance that cannot move")
}

// Deleting a migration aborts it: before the transfer it fails at once (the target Pod goes);
// during it the source's agent is asked to abort, and the migration is gone once that is recorded.
func TestDeletingAMigrationAbortsIt(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	startControllers(t, ns)
	ctx := context.Background()
	runningInstance(t, ns, "m", "node-a", nil)

	early := newMigration(ns, "early", "m")
	require.NoError(t, e.Client.Create(ctx, early))
	var target string
	eventually(t, "target pod created", func() bool {
		v, _ := get(t, &virtv1.VirtualMachineInstance{}, ns, "m")
		if v.Status.MigrationState == nil {
			return false
		}
		target = v.Status.MigrationState.TargetPod
		_, ok := get(t, &corev1.Pod{}, ns, target)
		return ok
	})
	require.NoError(t, e.Client.Delete(ctx, early))
	eventually(t, "deleted migration gone, failed in the instance, target pod deleted", func() bool {
		_, exists := get(t, &virtv1.VirtualMachineInstanceMigration{}, ns, "early")
		p, podExists := get(t, &corev1.Pod{}, ns, target)
		v, _ := get(t, &virtv1.VirtualMachineInstance{}, ns, "m")
		return !exists && (!podExists || p.DeletionTimestamp != nil) && v.Status.MigrationState.Failed &&
			v.Status.MigrationState.FailureReason == "the migration was deleted"
	})

	late := newMigration(ns, "late", "m")
	require.NoError(t, e.Client.Create(ctx, late))
	eventually(t, "second migration recorded", func() bool {
		v, _ := get(t, &virtv1.VirtualMachineInstance{}, ns, "m")
		return v.Status.MigrationState.MigrationUID == string(late.UID)
	})
	now := metav1.Now()
	agentWrites(t, ns, "m", func(st *virtv1.VirtualMachineInstanceStatus) {
		st.MigrationState.TargetNodeAddress, st.MigrationState.StartTimestamp = "10.0.0.2:8186", &now
	})
	require.NoError(t, e.Client.Delete(ctx, late))
	eventually(t, "abort requested", func() bool {
		v, _ := get(t, &virtv1.VirtualMachineInstance{}, ns, "m")
		return v.Status.MigrationState.AbortRequested
	})
	_, exists := get(t, &virtv1.VirtualMachineInstanceMigration{}, ns, "late")
	assert.True(t, exists, "the migration stays until the abort is recorded")
	agentWrites(t, ns, "m", func(st *virtv1.VirtualMachineInstanceStatus) {
		st.MigrationState.Failed, st.MigrationState.AbortStatus = true, virtv1.MigrationAbortSucceeded
	})
	eventually(t, "aborted migration gone", func() bool {
		_, exists := get(t, &virtv1.VirtualMachineInstanceMigration{}, ns, "late")
		return !exists
	})
}

// Ended migrations are garbage-collected: an instance keeps its FinishedToKeep newest.
func TestEndedMigrationsAreCollected(t *testing.T) {
	e := testenv.Require(t, env)
	ns := e.Namespace(t)
	startControllers(t, ns)
	ctx := context.Background()
	for i := range migration.FinishedToKeep + 2 { // for an instance that does not exist: each fails at once
		require.NoError(t, e.Client.Create(ctx, newMigration(ns, fmt.Sprintf("m%d", i), "ghost")))
	}
	eventually(t, "only the newest ended migrations are left", func() bool {
		var list virtv1.VirtualMachineInstanceMigrationList
		require.NoError(t, e.Client.List(ctx, &list, client.InNamespace(ns)))
		ended := 0
		for _, m := range list.Items {
			if m.Status.Phase != virtv1.MigrationFailed {
				return false
			}
			ended++
		}
		return ended == migration.FinishedToKeep
	})
}
