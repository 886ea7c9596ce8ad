//go:build e2e

package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// badRequests sends requests virt-api must refuse, each with a Status naming the object and the
// cause, and checks afterwards that none of them changed anything and virt-api never panicked. The
// namespace holds "vm" (Always, running, port 80 declared) and "halted" (Halted, no instance).
func badRequests(t *testing.T, f *framework.Framework) {
	vms, vmis := "/namespaces/"+f.Namespace+"/virtualmachines/", "/namespaces/"+f.Namespace+"/virtualmachineinstances/"
	before := snapshot(t, f)
	const noVM, noVMI = `virtualmachines.kubevirt.io "nope" not found`, `virtualmachineinstances.kubevirt.io "nope" not found`
	for _, c := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"PUT", vms + "nope/start", "", 404, noVM},
		{"PUT", vms + "nope/stop", "", 404, noVM},
		{"PUT", vms + "nope/restart", "", 404, noVM},
		{"PUT", vms + "nope/migrate", "", 404, noVM},
		{"PUT", vmis + "nope/pause", "", 404, noVMI},
		{"PUT", vmis + "nope/unpause", "", 404, noVMI},
		{"PUT", vmis + "nope/softreboot", "", 404, noVMI},
		{"GET", vmis + "nope/console", "", 404, noVMI},
		{"GET", vmis + "nope/vnc", "", 404, noVMI},
		{"GET", vmis + "nope/portforward/80", "", 404, noVMI},
		{"PUT", vms + "vm/start", "", 409, `virtualmachines.kubevirt.io "vm": runStrategy Always does not support manual start requests`},
		{"PUT", vms + "halted/stop", "", 409, `virtualmachines.kubevirt.io "halted": VM is not running`},
		{"PUT", vms + "halted/restart", "", 409, `virtualmachines.kubevirt.io "halted": runStrategy Halted does not support manual restart requests`},
		{"PUT", vms + "halted/migrate", "", 409, `virtualmachines.kubevirt.io "halted": VM is not running`},
		{"PUT", vmis + "halted/pause", "", 404, `virtualmachineinstances.kubevirt.io "halted" not found`},
		{"GET", vms + "halted/console", "", 404, `virtualmachineinstances.kubevirt.io "halted" not found`},
		{"PUT", vms + "vm/stop", "{", 400, "the request body is not valid *v1.StopOptions"},
		{"PUT", vms + "vm/stop", `{"gracePeriod":"soon"}`, 400, "gracePeriod"},
		{"PUT", vms + "vm/stop", `{"gracePeriod":-1}`, 400, "gracePeriod: must be >= 0, got -1"},
		{"PUT", vms + "vm/start", `{"paused":true,"color":"red"}`, 400, `unknown field "color"`},
		{"PUT", vms + "vm/restart", strings.Repeat(" ", 70<<10), 413, "larger than 65536 bytes"},
		{"PUT", vms + "vm/migrate", `{"addedNodeSelector":{"zone":"a"}}`, 400, "addedNodeSelector: not supported"},
		{"GET", vmis + "vm/portforward/0", "", 400, `port: "0" is not a TCP port number (1-65535)`},
		{"GET", vmis + "vm/portforward/99999", "", 400, `port: "99999" is not a TCP port number`},
		{"GET", vmis + "vm/portforward/http", "", 400, `port: "http" is not a TCP port number`},
		{"GET", vmis + "vm/portforward/80/udp", "", 400, `protocol: "udp" is not supported`},
		{"PUT", vmis + "vm/unpause", "", 409, "is already running"},
	} {
		call(f, c.method, c.path, c.body, c.code, c.want)
	}
	// Pause twice: the second is refused, and so is a soft reboot of the paused guest.
	put(f, vmis+"vm/pause", "", 202, "")
	put(f, vmis+"vm/pause", "", 409, "is already paused")
	put(f, vmis+"vm/softreboot", "", 409, "the guest is paused, not running: it cannot be rebooted")
	put(f, vmis+"vm/unpause", "", 202, "")

	// Admission: refusals naming the field.
	bad := demoVM(f.Namespace, "too-big", virtv1.RunStrategyHalted, 0, "")
	bad.Spec.Template.Spec.Domain.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}
	if err := f.Client.Create(f.Context(), bad); err == nil || !strings.Contains(err.Error(), "spec.template.spec.domain.resources.limits.memory") {
		t.Errorf("a VM whose guest memory exceeds its limit: %v, want a refusal naming spec.template.spec.domain.resources.limits.memory", err)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error { // the agent writes the instance's status meanwhile
		vmi := &virtv1.VirtualMachineInstance{}
		if err := f.Client.Get(f.Context(), client.ObjectKey{Namespace: f.Namespace, Name: "vm"}, vmi); err != nil {
			return err
		}
		vmi.Spec.Domain.CPU = &virtv1.CPU{Cores: 4}
		return f.Client.Update(f.Context(), vmi)
	})
	if err == nil || !strings.Contains(err.Error(), "spec: Forbidden") {
		t.Errorf("a change to a running instance's spec: %v, want spec: Forbidden", err)
	}

	if after := snapshot(t, f); after != before {
		t.Errorf("refused requests changed something:\nbefore %s\nafter  %s", before, after)
	}
	virtAPINeverPanicked(t, f)
}

// snapshot is what a refused request must not change: the VMs' specs and the running instance's
// spec and UID.
func snapshot(t *testing.T, f *framework.Framework) string {
	t.Helper()
	var b strings.Builder
	for _, name := range []string{"vm", "halted"} {
		vm := &virtv1.VirtualMachine{}
		if err := f.Client.Get(f.Context(), client.ObjectKey{Namespace: f.Namespace, Name: name}, vm); err != nil {
			t.Fatal(err)
		}
		b.WriteString(name + ": " + string(vm.Spec.EffectiveRunStrategy()) + " requests " + strconv.Itoa(len(vm.Status.StateChangeRequests)) +
			" generation " + strconv.FormatInt(vm.Generation, 10) + "; ")
	}
	vmi := &virtv1.VirtualMachineInstance{}
	if err := f.Client.Get(f.Context(), client.ObjectKey{Namespace: f.Namespace, Name: "vm"}, vmi); err != nil {
		t.Fatal(err)
	}
	b.WriteString("instance " + string(vmi.UID) + " generation " + strconv.FormatInt(vmi.Generation, 10))
	return b.String()
}

// virtAPINeverPanicked checks virt-api's containers never restarted and its log holds no recovered panic.
func virtAPINeverPanicked(t *testing.T, f *framework.Framework) {
	t.Helper()
	pods := &corev1.PodList{}
	if err := f.Client.List(context.Background(), pods, client.InNamespace("podvirt"), client.MatchingLabels{"app.kubernetes.io/name": "virt-api"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount > 0 {
				t.Errorf("virt-api %s restarted %d times", p.Name, cs.RestartCount)
			}
		}
		req := f.Clientset.CoreV1().Pods("podvirt").GetLogs(p.Name, &corev1.PodLogOptions{})
		raw, err := req.DoRaw(f.Context())
		if err != nil {
			t.Fatalf("virt-api logs: %v", err)
		}
		if strings.Contains(string(raw), "panic") {
			t.Errorf("virt-api %s logged a panic:\n%s", p.Name, tail(string(raw), 30))
		}
	}
}
