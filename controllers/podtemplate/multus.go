package podtemplate

import (
	"encoding/json"
	"fmt"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// MultusNetworksAnnotation is the Pod annotation Multus reads: the secondary networks to attach.
const MultusNetworksAnnotation = "k8s.v1.cni.cncf.io/networks"

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

// MultusNetworks names the instance's networks that Multus provides, as "name (networkName)".
func MultusNetworks(vmi *virtv1.VirtualMachineInstance) []string {
	var names []string
	for _, n := range vmi.Spec.Networks {
		if n.Multus != nil {
			names = append(names, fmt.Sprintf("%s (%s)", n.Name, n.Multus.NetworkName))
		}
	}
	return names
}
