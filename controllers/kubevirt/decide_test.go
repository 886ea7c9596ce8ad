package kubevirt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

func ready(name string) health { return health{name: name, found: true, available: true} }

func TestDecide(t *testing.T) {
	all := func(mod func([]health)) []health {
		h := []health{ready("virt-api"), ready("virt-controller"), ready("virt-operator"), ready("virt-handler")}
		if mod != nil {
			mod(h)
		}
		return h
	}
	type want struct {
		phase                                     virtv1.KubeVirtPhase
		available, progressing, degraded, created corev1.ConditionStatus
	}
	T, F := corev1.ConditionTrue, corev1.ConditionFalse
	for _, tc := range []struct {
		name     string
		deleting bool
		comps    []health
		want     want
	}{
		{"all ready", false, all(nil), want{virtv1.KubeVirtPhaseDeployed, T, F, F, T}},
		{"a component missing", false, all(func(h []health) { h[0] = health{name: "virt-api", why: "not found"} }),
			want{virtv1.KubeVirtPhaseDeploying, F, T, F, F}},
		{"rolling out, still available", false, all(func(h []health) { h[1].progressing = true }),
			want{virtv1.KubeVirtPhaseDeployed, T, T, F, T}},
		{"rolling out, not yet available", false, all(func(h []health) { h[3].available, h[3].progressing = false, true }),
			want{virtv1.KubeVirtPhaseDeploying, F, T, F, T}},
		{"unavailable and nothing rolling out", false, all(func(h []health) { h[3].available = false }),
			want{virtv1.KubeVirtPhaseDeploying, F, F, T, T}},
		{"deleting", true, all(nil), want{virtv1.KubeVirtPhaseDeleting, T, F, F, T}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decide(tc.deleting, tc.comps)
			assert.Equal(t, tc.want.phase, d.phase)
			got := map[virtv1.KubeVirtConditionType]corev1.ConditionStatus{}
			for _, c := range d.conditions {
				got[c.Type] = c.Status
				assert.NotEmpty(t, c.Reason, c.Type)
				assert.NotEmpty(t, c.Message, c.Type)
			}
			assert.Equal(t, map[virtv1.KubeVirtConditionType]corev1.ConditionStatus{
				virtv1.KubeVirtConditionAvailable: tc.want.available, virtv1.KubeVirtConditionProgressing: tc.want.progressing,
				virtv1.KubeVirtConditionDegraded: tc.want.degraded, virtv1.KubeVirtConditionCreated: tc.want.created,
			}, got)
		})
	}
}

func TestWorkloadHealth(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}}
	assert.Equal(t, health{name: "d", found: true, available: true}, deploymentHealth("d", d))
	d.Status.AvailableReplicas = 1
	assert.False(t, deploymentHealth("d", d).available, "one of two replicas")
	d.Status.ObservedGeneration = 1
	assert.True(t, deploymentHealth("d", d).progressing, "a new generation not yet observed")
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}
	assert.False(t, deploymentHealth("d", d).progressing, "stuck past its deadline: Degraded, not Progressing")
	assert.False(t, deploymentHealth("d", nil).found)

	ds := &appsv1.DaemonSet{Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberAvailable: 2}}
	assert.Equal(t, health{name: "ds", found: true, available: true}, daemonSetHealth("ds", ds))
	ds.Status.UpdatedNumberScheduled = 1
	assert.True(t, daemonSetHealth("ds", ds).progressing)
	ds.Status.DesiredNumberScheduled = 0
	assert.False(t, daemonSetHealth("ds", ds).available, "no node to run an agent on")
}

func TestSetConditionKeepsTimesWhileUnchanged(t *testing.T) {
	t0, t1 := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(200, 0))
	c := virtv1.KubeVirtCondition{Type: virtv1.KubeVirtConditionAvailable, Status: corev1.ConditionTrue, Reason: "R", Message: "M"}
	conds := setCondition(nil, c, t0)
	conds = setCondition(conds, c, t1)
	assert.Equal(t, t0, conds[0].LastProbeTime, "unchanged: no new probe time, so no write")
	assert.Equal(t, t0, conds[0].LastTransitionTime)
	c.Message = "other"
	conds = setCondition(conds, c, t1)
	assert.Equal(t, t1, conds[0].LastProbeTime)
	assert.Equal(t, t0, conds[0].LastTransitionTime, "same status: the transition stays")
	c.Status = corev1.ConditionFalse
	conds = setCondition(conds, c, t1)
	assert.Equal(t, t1, conds[0].LastTransitionTime)
	assert.Len(t, conds, 1)
}
