package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// KubeVirt's verbs that stand on a component Podvirt does not ship: each is present, takes whatever
// KubeVirt's takes, and exits 1 saying what it needs (no request is made).
var unavailable = []struct{ use, short, needs string }{
	{"image-upload", "Upload a VM image to a DataVolume/PersistentVolumeClaim (needs CDI: not in Podvirt)",
		"it needs CDI's upload proxy (cdi-uploadproxy) and the DataVolume API (cdi.kubevirt.io), which Podvirt does not ship; " +
			"copy the image into a PersistentVolumeClaim yourself (e.g. a Pod that writes it), or build a containerDisk image"},
	{"vmexport", "Export a VM volume (needs the export API: not in Podvirt)",
		"it needs KubeVirt's export API (export.kubevirt.io VirtualMachineExport) and its export server, which Podvirt does not ship; " +
			"read the claim from a Pod that mounts it instead"},
	{"usbredir", "Redirect a USB device to a virtual machine instance (needs USB redirection: not in Podvirt)",
		"it needs USB redirection devices in the guest (spec.domain.devices.clientPassthrough, refused by Podvirt's admission) and the usbredir " +
			"subresource, which Podvirt does not serve"},
	{"template", "Work with VirtualMachineTemplates (needs KubeVirt's template API: not in Podvirt)",
		"it needs KubeVirt's VirtualMachineTemplate API (template.kubevirt.io and its process subresource, from virt-template), which Podvirt " +
			"does not serve; write the VirtualMachine yourself, or with virtctl create vm"},
}

func newUnavailableCommands(_ *genericclioptions.ConfigFlags, _ genericiooptions.IOStreams) []*cobra.Command {
	var cmds []*cobra.Command
	for _, u := range unavailable {
		cmds = append(cmds, &cobra.Command{
			Use:                u.use,
			Short:              u.short,
			DisableFlagParsing: true, // KubeVirt's flags too: the answer is the same
			RunE: func(cmd *cobra.Command, _ []string) error {
				return fmt.Errorf("%s: not available in Podvirt: %s", cmd.CommandPath(), u.needs)
			},
		})
	}
	return cmds
}
