//go:build e2e

// The cluster's own e2e tests: what every Podvirt component relies on works on the cluster
// KUBECONFIG points at (the local one by default). Run with `make e2e`.
package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podvirt/podvirt/tests/framework"
)

func TestPlainPodRuns(t *testing.T) {
	f := framework.New(t)
	f.Create(f.ProbePod("sleeper", corev1.RestartPolicyNever, "sleep"))
	pod := f.WaitForPodRunningReady("sleeper", time.Minute)
	if pod.Status.PodIP == "" {
		t.Fatalf("running pod has no IP")
	}
	f.Eventually("sleeper logs", 30*time.Second, func(context.Context) (bool, error) {
		logs := f.PodLogs("sleeper", "")
		return strings.Contains(logs, "probe: sleeping"), fmt.Errorf("logs: %q", logs)
	})
}

func TestPodReachesAPIServerWithServiceAccount(t *testing.T) {
	f := framework.New(t)
	f.Create(&rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "default-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default", Namespace: f.Namespace}},
	})
	f.Create(f.ProbePod("lister", corev1.RestartPolicyOnFailure, "list-pods"))
	f.WaitForPodSucceeded("lister", 2*time.Minute)
	logs := f.PodLogs("lister", "")
	// The pod lists itself: the in-cluster config reached the apiserver through the kubernetes
	// Service with the pod's service-account token.
	if !strings.Contains(logs, "pod lister\n") {
		t.Fatalf("the pod did not list itself; logs:\n%s", logs)
	}
	svc := &corev1.Service{}
	if err := f.Client.Get(f.Context(), client.ObjectKey{Namespace: "default", Name: "kubernetes"}, svc); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs, "apiserver https://"+svc.Spec.ClusterIP+":443") {
		t.Fatalf("the pod did not use the kubernetes Service (%s); logs:\n%s", svc.Spec.ClusterIP, logs)
	}
}

func TestClusterIPServiceRoutesToPod(t *testing.T) {
	f := framework.New(t)
	text := "hello-from-" + f.Namespace
	f.Create(f.ProbePod("server", corev1.RestartPolicyAlways, "serve", "--port=8080", "--text="+text))
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "server"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	f.Create(svc)
	f.WaitForPodRunningReady("server", time.Minute)
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		t.Fatalf("service has no ClusterIP: %q", svc.Spec.ClusterIP)
	}
	f.Create(f.ProbePod("client", corev1.RestartPolicyNever, "fetch", "--url=http://"+svc.Spec.ClusterIP+"/", "--timeout=90s"))
	f.WaitForPodSucceeded("client", 2*time.Minute)
	if logs := f.PodLogs("client", ""); !strings.Contains(logs, text) {
		t.Fatalf("fetch through %s did not reach the server; logs:\n%s", svc.Spec.ClusterIP, logs)
	}
}

func TestPVCBindsAndKeepsData(t *testing.T) {
	f := framework.New(t)
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	f.Create(pvc)
	f.Eventually("claim bound", time.Minute, func(ctx context.Context) (bool, error) {
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false, err
		}
		return pvc.Status.Phase == corev1.ClaimBound, fmt.Errorf("phase %s", pvc.Status.Phase)
	})
	text := "kept-" + f.Namespace
	writer := withVolume(f.ProbePod("writer", corev1.RestartPolicyNever, "write", "--file=/data/f", "--text="+text))
	uid := int64(1000) // an unprivileged user can write to the volume
	writer.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &uid}
	f.Create(writer)
	f.WaitForPodSucceeded("writer", 2*time.Minute)
	f.Create(withVolume(f.ProbePod("reader", corev1.RestartPolicyNever, "read", "--file=/data/f")))
	f.WaitForPodSucceeded("reader", 2*time.Minute)
	if logs := f.PodLogs("reader", ""); !strings.Contains(logs, text) {
		t.Fatalf("the second pod did not find the data; logs:\n%s", logs)
	}
}

func withVolume(p *corev1.Pod) *corev1.Pod {
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	return p
}
