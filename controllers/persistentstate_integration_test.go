package controllers_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/controllers/podtemplate"
	"github.com/podvirt/podvirt/internal/testenv"
)

// A VM with a persistent TPM gets a persistent state claim it owns, which its launcher Pod mounts;
// a claim of that name owned by something else is not taken over: the instance says so.
func TestPersistentStateClaim(t *testing.T) {
	e := testenv.Require(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	startControllers(t, ns)

	v := newVM(ns, "tpm", virtv1.RunStrategyAlways)
	v.Spec.Template.Spec.Domain.Devices.TPM = &virtv1.TPMDevice{Persistent: ptr.To(true)}
	require.NoError(t, e.Client.Create(ctx, v))
	var pod *corev1.Pod
	eventually(t, "a launcher Pod", func() bool {
		inst := instance(t, ns, "tpm")
		pod = nil
		if inst != nil {
			pod = launcherPod(t, inst)
		}
		return pod != nil
	})
	claim, ok := get(t, &corev1.PersistentVolumeClaim{}, ns, "persistent-state-for-tpm")
	require.True(t, ok, "the persistent state claim")
	owner := metav1.GetControllerOf(claim)
	require.NotNil(t, owner)
	assert.Equal(t, "VirtualMachine", owner.Kind)
	assert.Equal(t, "tpm", owner.Name)
	mounted := false
	for _, vol := range pod.Spec.Volumes {
		mounted = mounted || (vol.Name == launcherv1.PersistentStateVolume && vol.PersistentVolumeClaim != nil && vol.PersistentVolumeClaim.ClaimName == claim.Name)
	}
	assert.True(t, mounted, "the launcher Pod mounts the claim")

	// Someone else's claim under the name the next VM needs.
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}}
	require.NoError(t, e.Client.Create(ctx, other))
	foreign := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "persistent-state-for-taken", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "ConfigMap", Name: other.Name, UID: other.UID, Controller: ptr.To(true)}}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Mi")}}},
	}
	require.NoError(t, e.Client.Create(ctx, foreign))
	w := newVM(ns, "taken", virtv1.RunStrategyAlways)
	w.Spec.Template.Spec.Domain.Devices.TPM = &virtv1.TPMDevice{Persistent: ptr.To(true)}
	require.NoError(t, e.Client.Create(ctx, w))
	eventually(t, "the instance says the claim belongs to the ConfigMap", func() bool {
		inst := instance(t, ns, "taken")
		if inst == nil {
			return false
		}
		c := condition(inst.Status.Conditions, virtv1.VirtualMachineInstanceSynchronized)
		return c.Reason == "FailedCreate" && strings.Contains(c.Message, "belongs to ConfigMap owner")
	})
	assert.Nil(t, launcherPod(t, instance(t, ns, "taken")))
	assert.Equal(t, "persistent-state-for-taken", podtemplate.PersistentStateClaim(instance(t, ns, "taken")))
}
