package kubevirt

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// Components are the workloads a deployed Podvirt runs in its namespace, by KubeVirt's names.
var Components = []Component{
	{Name: "virt-api", Kind: KindDeployment},
	{Name: "virt-controller", Kind: KindDeployment},
	{Name: "virt-operator", Kind: KindDeployment},
	{Name: "virt-handler", Kind: KindDaemonSet},
}

// Component is one workload of Podvirt's.
type Component struct {
	Name string
	Kind string
}

// Workload kinds of Components.
const (
	KindDeployment = "Deployment"
	KindDaemonSet  = "DaemonSet"
)

// health is what decide needs of one component: found or not, available, rolling out.
type health struct {
	name        string
	found       bool
	available   bool   // every wanted replica (at least one) is available
	progressing bool   // a rollout is not finished
	why         string // why not available, for the message
}

func deploymentHealth(name string, d *appsv1.Deployment) health {
	h := health{name: name, found: d != nil}
	if d == nil {
		h.why = "not found"
		return h
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	h.progressing = st.ObservedGeneration < d.Generation || st.UpdatedReplicas < want || st.Replicas > st.UpdatedReplicas
	for _, c := range st.Conditions { // a rollout past its deadline is stuck, not on its way
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			h.progressing = false
		}
	}
	h.available = want > 0 && st.AvailableReplicas >= want
	if !h.available {
		h.why = fmt.Sprintf("%d of %d replicas available", st.AvailableReplicas, want)
	}
	return h
}

func daemonSetHealth(name string, ds *appsv1.DaemonSet) health {
	h := health{name: name, found: ds != nil}
	if ds == nil {
		h.why = "not found"
		return h
	}
	st := ds.Status
	h.progressing = st.ObservedGeneration < ds.Generation || st.UpdatedNumberScheduled < st.DesiredNumberScheduled
	h.available = st.DesiredNumberScheduled > 0 && st.NumberAvailable >= st.DesiredNumberScheduled
	if !h.available {
		h.why = fmt.Sprintf("%d of %d node agents available", st.NumberAvailable, st.DesiredNumberScheduled)
	}
	return h
}

// decision is the status a KubeVirt object should have.
type decision struct {
	phase      virtv1.KubeVirtPhase
	conditions []virtv1.KubeVirtCondition // without times: setCondition keeps or stamps them
}

// decide is pure: the KubeVirt object's phase and conditions from its components' health.
func decide(deleting bool, comps []health) decision {
	var missing, unavailable, rolling []string
	for _, c := range comps {
		switch {
		case !c.found:
			missing = append(missing, c.name)
		case !c.available:
			unavailable = append(unavailable, c.name+" ("+c.why+")")
		}
		if c.found && c.progressing {
			rolling = append(rolling, c.name)
		}
	}
	sort.Strings(missing)
	cond := func(t virtv1.KubeVirtConditionType, ok bool, reason, msg string) virtv1.KubeVirtCondition {
		s := corev1.ConditionFalse
		if ok {
			s = corev1.ConditionTrue
		}
		return virtv1.KubeVirtCondition{Type: t, Status: s, Reason: reason, Message: msg}
	}
	d := decision{phase: virtv1.KubeVirtPhaseDeployed}
	created := cond(virtv1.KubeVirtConditionCreated, true, "AllResourcesCreated", "All resources were created.")
	if len(missing) > 0 {
		created = cond(virtv1.KubeVirtConditionCreated, false, "MissingComponents", "Not found: "+strings.Join(missing, ", ")+".")
	}
	notReady := append(append([]string{}, missing...), unavailable...)
	available := cond(virtv1.KubeVirtConditionAvailable, true, "AllComponentsReady", "All components are ready.")
	if len(notReady) > 0 {
		available = cond(virtv1.KubeVirtConditionAvailable, false, "NotAllComponentsReady", "Not ready: "+strings.Join(notReady, ", ")+".")
		d.phase = virtv1.KubeVirtPhaseDeploying
	}
	progressing := cond(virtv1.KubeVirtConditionProgressing, false, "AllComponentsReady", "All components are ready.")
	if len(rolling) > 0 || len(missing) > 0 {
		progressing = cond(virtv1.KubeVirtConditionProgressing, true, "DeploymentInProgress", "Rolling out: "+strings.Join(append(append([]string{}, rolling...), missing...), ", ")+".")
	}
	// Degraded: a component that exists is not available and is not rolling out, so nothing is
	// on its way to fix it.
	var broken []string
	for _, c := range comps {
		if c.found && !c.available && !c.progressing {
			broken = append(broken, c.name+" ("+c.why+")")
		}
	}
	degraded := cond(virtv1.KubeVirtConditionDegraded, false, "AllComponentsReady", "All components are ready.")
	if len(broken) > 0 {
		degraded = cond(virtv1.KubeVirtConditionDegraded, true, "ComponentsUnavailable", "Unavailable: "+strings.Join(broken, ", ")+".")
	}
	if deleting {
		d.phase = virtv1.KubeVirtPhaseDeleting
	}
	d.conditions = []virtv1.KubeVirtCondition{available, progressing, degraded, created}
	return d
}

// setCondition puts c into conds: its transition time kept while its status is unchanged, its probe
// time now.
func setCondition(conds []virtv1.KubeVirtCondition, c virtv1.KubeVirtCondition, now metav1.Time) []virtv1.KubeVirtCondition {
	c.LastProbeTime, c.LastTransitionTime = now, now
	for i := range conds {
		if conds[i].Type != c.Type {
			continue
		}
		if conds[i].Status == c.Status {
			c.LastTransitionTime = conds[i].LastTransitionTime
			if conds[i].Reason == c.Reason && conds[i].Message == c.Message {
				c.LastProbeTime = conds[i].LastProbeTime // unchanged: no write every pass
			}
		}
		conds[i] = c
		return conds
	}
	return append(conds, c)
}
