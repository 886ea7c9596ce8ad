package vmi

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/optionalapi"
)

// NetworkAttachmentDefinitionGVK is Multus' API: a secondary network an instance's Pod joins.
var NetworkAttachmentDefinitionGVK = schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"}

// MultusNetworksAnnotation is the Pod annotation Multus reads: the secondary networks to attach.
const MultusNetworksAnnotation = "k8s.v1.cni.cncf.io/networks"

// ReasonMultusNotInstalled (the Synchronized condition's reason): the instance has Multus networks
// and the cluster does not serve Multus' NetworkAttachmentDefinition API, so it gets no launcher Pod.
const ReasonMultusNotInstalled = "MultusNotInstalled"

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

// holdForMultus reports whether the instance must wait instead of getting a launcher Pod because its
// Multus networks need an API the cluster does not serve, saying why in the Synchronized condition
// and an Event; retry is when to look again.
func (r *Reconciler) holdForMultus(vmi *virtv1.VirtualMachineInstance) (held bool, retry time.Duration, err error) {
	nets := multusNetworks(vmi)
	if len(nets) == 0 {
		return false, 0, nil
	}
	served, err := optionalapi.Served(r.Discovery, NetworkAttachmentDefinitionGVK)
	if err != nil || served {
		return false, 0, err
	}
	message := "network(s) " + strings.Join(nets, ", ") +
		" need Multus, which is not installed (no k8s.cni.cncf.io NetworkAttachmentDefinition API): install Multus or use the pod network"
	vmi.Status.SetPhase(virtv1.Pending, "", metav1.NewTime(r.Clock.Now()))
	if c := meta.FindStatusCondition(vmi.Status.Conditions, virtv1.VirtualMachineInstanceSynchronized); c == nil || c.Reason != ReasonMultusNotInstalled {
		r.Recorder.Eventf(vmi, nil, corev1.EventTypeWarning, ReasonMultusNotInstalled, "Create", "Not starting: %s", message)
	}
	meta.SetStatusCondition(&vmi.Status.Conditions, metav1.Condition{
		Type: virtv1.VirtualMachineInstanceSynchronized, Status: metav1.ConditionFalse, Reason: ReasonMultusNotInstalled, Message: message,
	})
	return true, optionalapi.Recheck, nil
}

// multusSelection is one element of MultusNetworksAnnotation (Multus' NetworkSelectionElement).
type multusSelection struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Interface string `json:"interface"`
}

// multusAnnotation is MultusNetworksAnnotation's value for the instance's Multus networks ("" for
// none): each NetworkAttachmentDefinition ("name" in the instance's namespace, or "namespace/name")
// attached as the Pod interface the node agent bridges to the guest
// (launcherv1.SecondaryNetworkDevices).
func multusAnnotation(vmi *virtv1.VirtualMachineInstance) (string, error) {
	var sel []multusSelection
	for i, n := range vmi.Spec.Networks {
		if n.Multus == nil {
			continue
		}
		ns, name, ok := n.Multus.Attachment(vmi.Namespace)
		if !ok {
			return "", fmt.Errorf("spec.networks[%d].multus.networkName: %q is not NAME or NAMESPACE/NAME", i, n.Multus.NetworkName)
		}
		sel = append(sel, multusSelection{Name: name, Namespace: ns, Interface: launcherv1.SecondaryNetworkDevices(n.Name).PodInterface})
	}
	if len(sel) == 0 {
		return "", nil
	}
	raw, err := json.Marshal(sel)
	return string(raw), err
}
