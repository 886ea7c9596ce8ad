//go:build e2e

package e2e

import (
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// warnings collects the apiserver's Warning headers.
type warnings struct {
	mu   sync.Mutex
	text []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text = append(w.text, text)
}

// virt-api's admission webhooks: defaults, refusals naming the field, the deprecation warning, and
// an immutable instance spec.
func TestAdmission(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	ctx := f.Context()
	seen := &warnings{}
	cfg := rest.CopyConfig(f.Config)
	cfg.WarningHandler = seen
	c, err := client.New(cfg, client.Options{Scheme: f.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	vm := demoVM(f.Namespace, "legacy", virtv1.RunStrategyHalted, 0, "")
	vm.Spec.RunStrategy, vm.Spec.Running = nil, ptr.To(false)
	if err := c.Create(ctx, vm); err != nil {
		t.Fatalf("create a VM with spec.running: %v", err)
	}
	if got := strings.Join(seen.text, "\n"); !strings.Contains(got, "spec.running is deprecated") {
		t.Errorf("no deprecation warning for spec.running; warnings: %q", got)
	}

	bad := demoVM(f.Namespace, "cdrom", virtv1.RunStrategyHalted, 0, "")
	bad.Spec.Template.Spec.Domain.Devices.Disks = append(bad.Spec.Template.Spec.Domain.Devices.Disks,
		virtv1.Disk{Name: "iso", CDRom: &virtv1.CDRomTarget{Bus: virtv1.DiskBusVirtio}})
	bad.Spec.Template.Spec.Volumes = append(bad.Spec.Template.Spec.Volumes, virtv1.Volume{Name: "iso",
		VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: framework.Image("demo-containerdisk")}}})
	err = c.Create(ctx, bad)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.template.spec.domain.devices.disks[") || !strings.Contains(err.Error(), "cdrom.bus") {
		t.Errorf("a cdrom on virtio: want Invalid naming the field, got %v", err)
	}

	vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: "bare"},
		Spec: demoVM(f.Namespace, "bare", virtv1.RunStrategyHalted, 0, "").Spec.Template.Spec}
	if err := c.Create(ctx, vmi); err != nil {
		t.Fatalf("create a VMI: %v", err)
	}
	if vmi.Spec.Domain.Machine == nil || vmi.Spec.Domain.Machine.Type != virtv1.DefaultMachineType {
		t.Errorf("machine type not defaulted: %+v", vmi.Spec.Domain.Machine)
	}
	for _, iface := range vmi.Spec.Domain.Devices.Interfaces {
		if iface.Model != virtv1.DefaultInterfaceModel {
			t.Errorf("interface %s model not defaulted: %q", iface.Name, iface.Model)
		}
	}
	patch := client.MergeFrom(vmi.DeepCopy())
	vmi.Spec.Hostname = "changed"
	if err := c.Patch(ctx, vmi, patch); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "cannot change once created") {
		t.Errorf("changing a VMI's spec: want Invalid, got %v", err)
	}
}
