//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
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
// missing file; a containerDisk whose qcow2 names a backing file (a file of the launcher's own) is
// refused naming the volume.
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

	backing := kernelBootVM(f.Namespace, "backing-file", virtv1.RunStrategyAlways)
	bs := &backing.Spec.Template.Spec
	bs.Domain.Devices.Disks = append(bs.Domain.Devices.Disks, virtv1.Disk{Name: "planted", Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}})
	bs.Volumes = append(bs.Volumes, virtv1.Volume{Name: "planted", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{
		Image: framework.Image("e2e-backing-disk"), ImagePullPolicy: corev1.PullNever}}})
	f.Create(backing)

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
		return eventSays(ctx, f, "bad-path", "spec.domain.firmware.kernelBoot.container.kernelPath", "copying /boot/no-such-kernel out of its image failed")
	})

	f.Eventually("the instance fails naming the volume whose image has a backing file", 3*time.Minute, func(ctx context.Context) (bool, error) {
		return eventSays(ctx, f, "backing-file", "spec.volumes[name=planted].containerDisk", "backing file is refused")
	})
}

// eventSays reports whether an Event of the object named name says every one of texts.
func eventSays(ctx context.Context, f *framework.Framework, name string, texts ...string) (bool, error) {
	var events corev1.EventList
	if err := f.Client.List(ctx, &events, client.InNamespace(f.Namespace)); err != nil {
		return false, err
	}
	var seen []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name != name {
			continue
		}
		seen = append(seen, e.Reason+": "+e.Message)
		missing := slices.IndexFunc(texts, func(t string) bool { return !strings.Contains(e.Message, t) })
		if missing < 0 {
			return true, nil
		}
	}
	return false, fmt.Errorf("no event of %s says %q yet; its events: %q", name, texts, seen)
}
