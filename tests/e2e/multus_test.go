//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	vmictl "github.com/podvirt/podvirt/controllers/vmi"
	"github.com/podvirt/podvirt/internal/localcluster"
	"github.com/podvirt/podvirt/internal/optionalapi"
	"github.com/podvirt/podvirt/tests/framework"
)

// multusVM is a demo VM on the pod network and on the Multus network "blue" (bridge binding),
// pinned to node, whose user data gives its second NIC address/24 and then runs then.
func multusVM(ns, name, node, address, then string) *virtv1.VirtualMachine {
	script := fmt.Sprintf(`#!/bin/sh
ip link set eth1 up
ip addr add %s/24 dev eth1
echo "eth1: $(cat /sys/class/net/eth1/address) %s"
%s
`, address, address, then)
	vm := demoVM(ns, name, virtv1.RunStrategyAlways, 0, script)
	spec := &vm.Spec.Template.Spec
	spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	spec.Domain.Devices.Interfaces = append(spec.Domain.Devices.Interfaces, virtv1.Interface{Name: "blue", Bridge: &virtv1.InterfaceBridge{}})
	spec.Networks = append(spec.Networks, virtv1.Network{Name: "blue", NetworkSource: virtv1.NetworkSource{Multus: &virtv1.MultusNetwork{NetworkName: "blue-net"}}})
	return vm
}

// A VM with a Multus network on a cluster without Multus is stored and says, naming the network,
// that it needs Multus; it gets no launcher Pod. Once Multus is installed (its thin plugin on the
// nodes and its CRD, as its installer does) and the NetworkAttachmentDefinition exists, the same VM
// starts, and a second VM on that network reaches the first over their bridged NICs at layer 2.
func TestMultusBridgeNetwork(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	binary, manifest := os.Getenv("PODVIRT_MULTUS"), os.Getenv("PODVIRT_MULTUS_MANIFEST")
	if binary == "" || manifest == "" {
		t.Fatal("PODVIRT_MULTUS and PODVIRT_MULTUS_MANIFEST must name Multus' plugin and its manifest (`make e2e` sets them)")
	}
	cluster := localcluster.DefaultConfig()
	if served, err := optionalapi.Served(f.Clientset.Discovery(), vmictl.NetworkAttachmentDefinitionGVK); err != nil || served {
		t.Fatalf("Multus' API is served already (err %v): the test installs Multus itself (make cluster-multus-off first)", err)
	}
	host := f.HostNode()
	first := multusVM(f.Namespace, "blue-a", host, "192.168.200.1", "")
	f.Create(first)
	f.Eventually("the VM says it needs Multus, naming the network", 2*time.Minute, func(ctx context.Context) (bool, error) {
		cur := &virtv1.VirtualMachine{}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(first), cur); err != nil {
			return false, err
		}
		for _, c := range cur.Status.Conditions {
			if c.Type == virtv1.VirtualMachineReady && c.Reason == vmictl.ReasonMultusNotInstalled && strings.Contains(c.Message, "blue (blue-net)") {
				return true, nil
			}
		}
		return false, fmt.Errorf("conditions %+v", cur.Status.Conditions)
	})
	pods := &corev1.PodList{}
	if err := f.Client.List(f.Context(), pods, client.InNamespace(f.Namespace)); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Fatalf("a launcher Pod was created for a VM whose network is missing: %s", pods.Items[0].Name)
	}

	t.Cleanup(func() { removeMultus(t, f, cluster, manifest) })
	if err := localcluster.EnableMultus(f.Context(), cluster, binary, manifest); err != nil {
		t.Fatalf("install Multus: %v", err)
	}
	nad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
		"metadata": map[string]any{"name": "blue-net", "namespace": f.Namespace},
		"spec":     map[string]any{"config": fmt.Sprintf(`{"cniVersion": "0.3.1", "name": "blue-net", "type": "bridge", "bridge": %q}`, localcluster.SecondaryBridge)},
	}}
	f.Create(nad)
	nudge(t, f, "blue-a") // rather than wait for the instance's periodic look at the API

	second := multusVM(f.Namespace, "blue-b", host, "192.168.200.2",
		`n=0; until ping -c 1 -W 1 192.168.200.1 >/dev/null 2>&1; do n=$((n+1)); [ $n -ge 90 ] && { echo "blue: 192.168.200.1 unreachable"; exit 1; }; done; echo "blue: reached 192.168.200.1"`)
	f.Create(second)
	a := waitRunning(t, f, "blue-a", "")
	b := waitRunning(t, f, "blue-b", "")
	consoleContains(t, f, b, "blue: reached 192.168.200.1")

	// The status names Multus' Pod interface and the MAC the guest sees on its second NIC.
	for _, vmi := range []*virtv1.VirtualMachineInstance{a, b} {
		cur := &virtv1.VirtualMachineInstance{}
		if err := f.Client.Get(f.Context(), client.ObjectKeyFromObject(vmi), cur); err != nil {
			t.Fatal(err)
		}
		var blue *virtv1.VirtualMachineInstanceNetworkInterface
		for i := range cur.Status.Interfaces {
			if cur.Status.Interfaces[i].Name == "blue" {
				blue = &cur.Status.Interfaces[i]
			}
		}
		if blue == nil || blue.PodInterfaceName != launcherv1.SecondaryNetworkDevices("blue").PodInterface || blue.MAC == "" {
			t.Fatalf("%s: status interfaces %+v: want blue on Pod interface %s with its MAC", vmi.Name, cur.Status.Interfaces, launcherv1.SecondaryNetworkDevices("blue").PodInterface)
		}
		consoleContains(t, f, vmi, "eth1: "+blue.MAC)
	}
}

// nudge touches the VM's instance so that its controller looks at it now.
func nudge(t *testing.T, f *framework.Framework, name string) {
	t.Helper()
	vmi := &virtv1.VirtualMachineInstance{}
	if err := f.Client.Get(f.Context(), client.ObjectKey{Namespace: f.Namespace, Name: name}, vmi); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(vmi.DeepCopy())
	vmi.Annotations = map[string]string{"podvirt.test/nudge": time.Now().Format(time.RFC3339Nano)}
	if err := f.Client.Patch(f.Context(), vmi, patch); err != nil {
		t.Fatal(err)
	}
}

// removeMultus deletes the test's VMs and waits for their Pods to be gone, so that Multus releases
// their networks, then uninstalls Multus.
func removeMultus(t *testing.T, f *framework.Framework, cluster localcluster.Config, manifest string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := f.Client.DeleteAllOf(ctx, &virtv1.VirtualMachine{}, client.InNamespace(f.Namespace)); err != nil {
		t.Errorf("delete the VMs: %v", err)
	}
	left := 0 // t.Context() is done by now: poll with ctx
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		if err := f.Client.List(ctx, pods, client.InNamespace(f.Namespace)); err != nil {
			return false, nil
		}
		left = len(pods.Items)
		return left == 0, nil
	})
	if err != nil {
		t.Errorf("%d launcher Pods still there before uninstalling Multus: %v", left, err)
	}
	if err := localcluster.DisableMultus(ctx, cluster, manifest); err != nil {
		t.Errorf("uninstall Multus: %v", err)
	}
}
