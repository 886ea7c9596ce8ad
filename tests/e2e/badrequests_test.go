//go:build e2e

package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// badRequests checks the refusals that depend on the instance's state (the corpus, badInputCorpus,
// holds the rest), and that none of them changed anything. The namespace holds "vm" (Always,
// running, port 80 declared) and "halted" (Halted, no instance).
func badRequests(t *testing.T, f *framework.Framework) {
	vmis := "/namespaces/" + f.Namespace + "/virtualmachineinstances/"
	before := snapshot(t, f)
	// Pause twice: the second is refused, and so is a soft reboot of the paused guest.
	put(f, vmis+"vm/pause", "", 202, "")
	put(f, vmis+"vm/pause", "", 409, "is already paused")
	put(f, vmis+"vm/softreboot", "", 409, "the guest is paused, not running: it cannot be rebooted")
	put(f, vmis+"vm/reset", "", 409, "the guest is paused, not running: it cannot be reset")
	put(f, vmis+"vm/unpause", "", 202, "")

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
