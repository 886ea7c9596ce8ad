package vmi

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/controllers/podtemplate"
	"github.com/podvirt/podvirt/internal/optionalapi"
)

// NetworkAttachmentDefinitionGVK is Multus' API: a secondary network an instance's Pod joins.
var NetworkAttachmentDefinitionGVK = schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"}

// ReasonMultusNotInstalled (the Synchronized condition's reason): the instance has Multus networks
// and the cluster does not serve Multus' NetworkAttachmentDefinition API, so it gets no launcher Pod.
const ReasonMultusNotInstalled = "MultusNotInstalled"

// multusMissing says why the instance must wait instead of getting a launcher Pod ("" when it need
// not): its Multus networks need an API the cluster does not serve.
func (r *Reconciler) multusMissing(vmi *virtv1.VirtualMachineInstance) (string, error) {
	nets := podtemplate.MultusNetworks(vmi)
	if len(nets) == 0 {
		return "", nil
	}
	served, err := optionalapi.Served(r.Discovery, NetworkAttachmentDefinitionGVK)
	if err != nil || served {
		return "", err
	}
	return "network(s) " + strings.Join(nets, ", ") +
		" need Multus, which is not installed (no k8s.cni.cncf.io NetworkAttachmentDefinition API): install Multus or use the pod network", nil
}

// hold keeps the instance Pending, saying why in the Synchronized condition and, when that is
// news, an Event.
func (r *Reconciler) hold(vmi *virtv1.VirtualMachineInstance, message string, now metav1.Time) {
	vmi.Status.SetPhase(virtv1.Pending, "", now)
	if c := meta.FindStatusCondition(vmi.Status.Conditions, virtv1.VirtualMachineInstanceSynchronized); c == nil || c.Reason != ReasonMultusNotInstalled {
		r.Recorder.Eventf(vmi, nil, corev1.EventTypeWarning, ReasonMultusNotInstalled, "Create", "Not starting: %s", message)
	}
	meta.SetStatusCondition(&vmi.Status.Conditions, metav1.Condition{
		Type: virtv1.VirtualMachineInstanceSynchronized, Status: metav1.ConditionFalse, Reason: ReasonMultusNotInstalled, Message: message,
	})
}
