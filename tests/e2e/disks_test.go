//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// The disk containers' failures reach the VM, as users see them: a kernelBoot image that cannot
// be pulled shows the VM ErrImagePull (or ImagePullBackOff) with the image named, while the launcher
// keeps waiting; a kernel path that is not in the image fails the instance naming the field and the
// missing file.
func TestDiskContainerFailuresReachTheVM(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)

	missing := kernelBootVM(f.Namespace, "missing-image", virtv1.RunStrategyAlways)
	kb := missing.Spec.Template.Spec.Domain.Firmware.KernelBoot.Container
	kb.Image, kb.ImagePullPolicy = "localhost:1/podvirt/does-not-exist:dev", corev1.PullIfNotPresent // refused at once
	f.Create(missing)

	badPath := kernelBootVM(f.Namespace, "bad-path", virtv1.RunStrategyAlways)
	badPath.Spec.Template.Spec.Domain.Firmware.KernelBoot.Container.KernelPath = "/boot/no-such-kernel"
	f.Create(badPath)

	f.Eventually("the VM shows the image pull error", 3*time.Minute, func(ctx context.Context) (bool, error) {
		vm, vmi := &virtv1.VirtualMachine{}, &virtv1.VirtualMachineInstance{}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(missing), vm); err != nil {
			return false, err
		}
		_ = f.Client.Get(ctx, client.ObjectKeyFromObject(missing), vmi)
		c := meta.FindStatusCondition(vmi.Status.Conditions, virtv1.VirtualMachineInstanceSynchronized)
		st := vm.Status.PrintableStatus
		ok := (st == virtv1.VirtualMachineStatusErrImagePull || st == virtv1.VirtualMachineStatusImagePullBackOff) &&
			c != nil && strings.Contains(c.Message, "does-not-exist")
		return ok, fmt.Errorf("VM %s, instance %s, Synchronized %+v", st, vmi.Status.Phase, c)
	})

	f.Eventually("the instance fails naming the kernel path", 3*time.Minute, func(ctx context.Context) (bool, error) {
		vm := &virtv1.VirtualMachine{}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(badPath), vm); err != nil {
			return false, err
		}
		var events corev1.EventList
		if err := f.Client.List(ctx, &events, client.InNamespace(f.Namespace)); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "bad-path" && strings.Contains(e.Message, "spec.domain.firmware.kernelBoot.container.kernelPath") &&
				strings.Contains(e.Message, "copying /boot/no-such-kernel out of its image failed") {
				return true, nil
			}
		}
		return false, fmt.Errorf("VM %s; no event naming the kernel path yet", vm.Status.PrintableStatus)
	})
}
