package vmi

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/optionalapi"
)

// NetworkAttachmentDefinitionGVK is Multus' API: a secondary network an instance's Pod joins.
var NetworkAttachmentDefinitionGVK = schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"}

// Why an instance with Multus networks gets no launcher Pod (the Synchronized condition's reason).
const (
	// ReasonMultusNotInstalled: the cluster does not serve Multus' NetworkAttachmentDefinition API.
	ReasonMultusNotInstalled = "MultusNotInstalled"
	// ReasonSecondaryNetworksNotSupported: Multus is there, and Podvirt does not attach its networks yet.
	ReasonSecondaryNetworksNotSupported = "SecondaryNetworksNotSupported"
)

// multusNetworks names the instance's networks that Multus provides, as "name (networkName)".
func multusNetworks(vmi *virtv1.VirtualMachineInstance) []string {
	var names []string
	for _, n := range vmi.Spec.Networks {
		if n.Multus != nil {
			names = append(names, fmt.Sprintf("%s (%s)", n.Name, n.Multus.NetworkName))
		}
	}
	return names
}

// holdForMultus reports whether the instance must wait instead of getting a launcher Pod because of
// its Multus networks, saying why in the Synchronized condition and an Event; retry is when to look
// again (zero: only a change of the instance helps).
func (r *Reconciler) holdForMultus(vmi *virtv1.VirtualMachineInstance) (held bool, retry time.Duration, err error) {
	nets := multusNetworks(vmi)
	if len(nets) == 0 {
		return false, 0, nil
	}
	served, err := optionalapi.Served(r.Client.RESTMapper(), NetworkAttachmentDefinitionGVK)
	if err != nil {
		return false, 0, err
	}
	reason, message := ReasonSecondaryNetworksNotSupported,
		"network(s) "+strings.Join(nets, ", ")+": Podvirt does not attach Multus secondary networks yet; use the pod network"
	if !served {
		reason, message = ReasonMultusNotInstalled, "network(s) "+strings.Join(nets, ", ")+
			" need Multus, which is not installed (no k8s.cni.cncf.io NetworkAttachmentDefinition API): install Multus or use the pod network"
		retry = optionalapi.Recheck
	}
	vmi.Status.SetPhase(virtv1.Pending, "", metav1.NewTime(r.Clock.Now()))
	if c := meta.FindStatusCondition(vmi.Status.Conditions, virtv1.VirtualMachineInstanceSynchronized); c == nil || c.Reason != reason {
		r.Recorder.Eventf(vmi, nil, corev1.EventTypeWarning, reason, "Create", "Not starting: %s", message)
	}
	meta.SetStatusCondition(&vmi.Status.Conditions, metav1.Condition{
		Type: virtv1.VirtualMachineInstanceSynchronized, Status: metav1.ConditionFalse, Reason: reason, Message: message,
	})
	return true, retry, nil
}
