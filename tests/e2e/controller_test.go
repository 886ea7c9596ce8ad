//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// requireDeployed fails early, and clearly, when Podvirt is not deployed on the cluster.
func requireDeployed(f *framework.Framework) {
	f.T().Helper()
	f.Eventually("virt-controller available (deploy with `make deploy`)", 2*time.Minute, func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "podvirt", Name: "virt-controller"}, d); err != nil {
			return false, err
		}
		return d.Status.AvailableReplicas > 0, fmt.Errorf("available replicas %d", d.Status.AvailableReplicas)
	})
	// virt-api serves the admission webhooks every VM and VMI passes (failurePolicy Fail).
	f.Eventually("virt-api available", 3*time.Minute, func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "podvirt", Name: "virt-api"}, d); err != nil {
			return false, err
		}
		return d.Status.AvailableReplicas > 0, fmt.Errorf("available replicas %d", d.Status.AvailableReplicas)
	})
}

func kernelBootVM(ns, name string, strategy virtv1.VirtualMachineRunStrategy) *virtv1.VirtualMachine {
	return &virtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: virtv1.VirtualMachineSpec{
			RunStrategy: ptr.To(strategy),
			Template: &virtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: virtv1.VirtualMachineInstanceSpec{
					Domain: virtv1.DomainSpec{
						Resources: virtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64M")}},
						Firmware: &virtv1.Firmware{KernelBoot: &virtv1.KernelBoot{
							KernelArgs: "console=ttyS0",
							Container:  &virtv1.KernelBootContainer{Image: framework.Image("demo-kernelboot"), KernelPath: "/boot/vmlinuz", InitrdPath: "/boot/initramfs.gz"},
						}},
					},
				},
			},
		},
	}
}

func TestAlwaysVMGetsALauncherPodAndSurvivesItsDeletion(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	vm := kernelBootVM(f.Namespace, "immortal", virtv1.RunStrategyAlways)
	f.Create(vm)

	var first virtv1.VirtualMachineInstance
	var pod corev1.Pod
	f.Eventually("launcher pod scheduled to the node", 2*time.Minute, func(ctx context.Context) (bool, error) {
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(vm), &first); err != nil {
			return false, err
		}
		var pods corev1.PodList
		if err := f.Client.List(ctx, &pods, client.InNamespace(f.Namespace), client.MatchingLabels{launcherv1.CreatedByLabel: string(first.UID)}); err != nil {
			return false, err
		}
		if len(pods.Items) != 1 {
			return false, fmt.Errorf("%d launcher pods", len(pods.Items))
		}
		pod = pods.Items[0]
		return pod.Spec.NodeName != "", fmt.Errorf("pod %s not scheduled (phase %s)", pod.Name, pod.Status.Phase)
	})
	if pod.Labels[launcherv1.DomainLabel] != "immortal" || pod.Labels[launcherv1.AppLabel] != launcherv1.AppLabelValue {
		t.Fatalf("launcher pod labels: %v", pod.Labels)
	}

	if err := f.Client.Delete(f.Context(), &pod); err != nil {
		t.Fatal(err)
	}
	f.Eventually("the instance failed and the VM made a new one", 3*time.Minute, func(ctx context.Context) (bool, error) {
		cur := &virtv1.VirtualMachineInstance{}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(vm), cur); err != nil {
			return false, err
		}
		return cur.UID != first.UID, fmt.Errorf("instance %s phase %s reason %q", cur.UID, cur.Status.Phase, cur.Status.Reason)
	})
	var events corev1.EventList
	if err := f.Client.List(f.Context(), &events, client.InNamespace(f.Namespace)); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range events.Items {
		seen[e.Reason+"/"+e.InvolvedObject.Kind] = true
	}
	for _, want := range []string{"SuccessfulCreate/VirtualMachine", "SuccessfulCreate/VirtualMachineInstance"} {
		if !seen[want] {
			t.Errorf("no %s event; events: %v", want, seen)
		}
	}
}
