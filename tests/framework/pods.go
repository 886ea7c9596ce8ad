package framework

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/podvirt/podvirt/internal/localcluster"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ProbePod returns a pod running the e2e probe image with args (see tests/e2e/probe).
func (f *Framework) ProbePod(name string, restart corev1.RestartPolicy, args ...string) *corev1.Pod {
	grace := int64(2)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.Namespace, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 restart,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "probe", Image: Image("e2e-probe"), ImagePullPolicy: corev1.PullIfNotPresent,
				Args: args,
			}},
		},
	}
}

// Pod fetches a pod of the test's namespace.
func (f *Framework) Pod(ctx context.Context, name string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: name}, pod)
	return pod, err
}

// WaitForPodRunningReady waits until the pod runs with every container ready.
func (f *Framework) WaitForPodRunningReady(name string, timeout time.Duration) *corev1.Pod {
	f.t.Helper()
	var pod *corev1.Pod
	f.Eventually("pod "+name+" running and ready", timeout, func(ctx context.Context) (bool, error) {
		p, err := f.Pod(ctx, name)
		if err != nil {
			return false, err
		}
		pod = p
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			return false, fmt.Errorf("pod ended in phase %s", p.Status.Phase)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, fmt.Errorf("phase %s, %s", p.Status.Phase, containerStates(p))
	})
	return pod
}

// WaitForPodSucceeded waits until the pod has run to completion and fails the test (with the
// pod's logs) if it failed instead.
func (f *Framework) WaitForPodSucceeded(name string, timeout time.Duration) *corev1.Pod {
	f.t.Helper()
	var pod *corev1.Pod
	f.Eventually("pod "+name+" succeeded", timeout, func(ctx context.Context) (bool, error) {
		p, err := f.Pod(ctx, name)
		if err != nil {
			return false, err
		}
		pod = p
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed,
			fmt.Errorf("phase %s, %s", p.Status.Phase, containerStates(p))
	})
	if pod.Status.Phase == corev1.PodFailed {
		f.t.Fatalf("pod %s failed: %s\nlogs:\n%s", name, containerStates(pod), f.PodLogs(name, ""))
	}
	return pod
}

// PodLogs returns a container's log ("" means the pod's only container), or the error text.
func (f *Framework) PodLogs(pod, container string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return f.podLogs(ctx, pod, container, false)
}

func (f *Framework) podLogs(ctx context.Context, pod, container string, previous bool) string {
	req := f.Clientset.CoreV1().Pods(f.Namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, Previous: previous})
	rc, err := req.Stream(ctx)
	if err != nil {
		return fmt.Sprintf("<logs unavailable: %v>", err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil {
		return fmt.Sprintf("%s<read error: %v>", data, err)
	}
	return string(data)
}

// containerStates describes every container's state in one line.
func containerStates(p *corev1.Pod) string {
	var parts []string
	all := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, s := range all {
		switch {
		case s.State.Waiting != nil:
			parts = append(parts, fmt.Sprintf("%s waiting (%s: %s)", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message))
		case s.State.Running != nil:
			parts = append(parts, fmt.Sprintf("%s running (ready=%v)", s.Name, s.Ready))
		case s.State.Terminated != nil:
			parts = append(parts, fmt.Sprintf("%s terminated (%s, exit %d)", s.Name, s.State.Terminated.Reason, s.State.Terminated.ExitCode))
		}
	}
	if len(parts) == 0 {
		return "no container status yet"
	}
	return strings.Join(parts, "; ")
}

// HostNode is the name of the local cluster's node that is this machine itself (its first node:
// the one whose cgroups and processes the tests can read directly).
func (f *Framework) HostNode() string {
	f.t.Helper()
	ip := localcluster.DefaultConfig().NodeIP.String()
	nodes := &corev1.NodeList{}
	if err := f.Client.List(f.Context(), nodes); err != nil {
		f.t.Fatalf("list nodes: %v", err)
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && a.Address == ip {
				return n.Name
			}
		}
	}
	f.t.Fatalf("no node has InternalIP %s (is KUBECONFIG the local cluster's?)", ip)
	return ""
}
