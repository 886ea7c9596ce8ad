//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// hostNodeIP is the InternalIP of the local cluster's first node, the machine itself.
const hostNodeIP = "10.218.0.1"

// e2eNodes is how many nodes the e2e tests need (`make e2e` brings up E2E_NODES=2).
const e2eNodes = 2

// readyNodes returns the names of the Ready nodes, failing unless there are at least n.
func readyNodes(t *testing.T, f *framework.Framework, n int) []string {
	t.Helper()
	var names []string
	f.Eventually(fmt.Sprintf("%d Ready nodes (make cluster-up NODES=%d; make e2e does this)", n, n), 2*time.Minute, func(ctx context.Context) (bool, error) {
		nodes := &corev1.NodeList{}
		if err := f.Client.List(ctx, nodes); err != nil {
			return false, err
		}
		names = names[:0]
		for _, node := range nodes.Items {
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					names = append(names, node.Name)
				}
			}
		}
		sort.Strings(names)
		return len(names) >= n, fmt.Errorf("Ready nodes: %v", names)
	})
	return names
}

// hostNode is the name of the node that is this machine itself (its first node).
func hostNode(t *testing.T, f *framework.Framework) string {
	t.Helper()
	nodes := &corev1.NodeList{}
	if err := f.Client.List(f.Context(), nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && a.Address == hostNodeIP {
				return n.Name
			}
		}
	}
	t.Fatalf("no node has InternalIP %s (is KUBECONFIG the local cluster's?)", hostNodeIP)
	return ""
}

// otherNode is a Ready node that is not this machine itself.
func otherNode(t *testing.T, f *framework.Framework) string {
	t.Helper()
	host := hostNode(t, f)
	for _, n := range readyNodes(t, f, e2eNodes) {
		if n != host {
			return n
		}
	}
	t.Fatalf("no Ready node besides %s", host)
	return ""
}

func pinned(pod *corev1.Pod, node string) *corev1.Pod {
	pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	return pod
}

// Two nodes on one machine: a node agent on each; pods on either node reach pods on the other,
// ClusterIP Services with endpoints on either node, and the apiserver.
func TestTwoNodesNetwork(t *testing.T) {
	f := framework.New(t)
	nodes := readyNodes(t, f, e2eNodes)
	f.Eventually("a Ready virt-handler on every node", 3*time.Minute, func(ctx context.Context) (bool, error) {
		ds := &appsv1.DaemonSet{}
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "podvirt", Name: "virt-handler"}, ds); err != nil {
			return false, err
		}
		return int(ds.Status.NumberReady) >= len(nodes), fmt.Errorf("virt-handler ready on %d of %d nodes", ds.Status.NumberReady, len(nodes))
	})
	f.Create(&rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "default-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default", Namespace: f.Namespace}},
	})
	servers := map[string]*corev1.Pod{} // node → its server pod
	services := map[string]string{}     // node → the ClusterIP of a Service selecting its server
	for i, node := range nodes[:e2eNodes] {
		name := fmt.Sprintf("server-%d", i)
		f.Create(pinned(f.ProbePod(name, corev1.RestartPolicyAlways, "serve", "--port=8080", "--text=hello-from-"+node), node))
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
		f.Create(svc)
		servers[node], services[node] = f.WaitForPodRunningReady(name, time.Minute), svc.Spec.ClusterIP
		if got := servers[node].Spec.NodeName; got != node {
			t.Fatalf("%s runs on %s, want %s", name, got, node)
		}
	}
	for i, from := range nodes[:e2eNodes] {
		to := nodes[(i+1)%e2eNodes]
		for j, url := range []string{"http://" + servers[to].Status.PodIP + ":8080/", "http://" + services[to] + "/", "http://" + services[from] + "/"} {
			name := fmt.Sprintf("fetch-%d-%d", i, j)
			f.Create(pinned(f.ProbePod(name, corev1.RestartPolicyNever, "fetch", "--url="+url, "--timeout=60s"), from))
			f.WaitForPodSucceeded(name, 2*time.Minute)
			want := "hello-from-" + to
			if j == 2 {
				want = "hello-from-" + from
			}
			if logs := f.PodLogs(name, ""); !strings.Contains(logs, want) {
				t.Errorf("from %s, %s did not answer %q; logs:\n%s", from, url, want, logs)
			}
		}
		name := fmt.Sprintf("lister-%d", i)
		f.Create(pinned(f.ProbePod(name, corev1.RestartPolicyOnFailure, "list-pods"), from))
		f.WaitForPodSucceeded(name, 2*time.Minute)
		if logs := f.PodLogs(name, ""); !strings.Contains(logs, "pod "+name+"\n") {
			t.Errorf("a pod on %s did not list itself through the apiserver; logs:\n%s", from, logs)
		}
	}
}

// A VM on the second node: its launcher Pod runs there, the guest answers on the node's pod
// network, and the console and pause/unpause reach it through virt-api and that node's agent.
func TestVMOnSecondNode(t *testing.T) {
	f := framework.New(t)
	requireVirtAPI(f)
	node := otherNode(t, f)
	vm := demoVM(f.Namespace, "far", virtv1.RunStrategyAlways, 0, "")
	vm.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	f.Create(vm)
	vmi := waitRunning(t, f, "far", "")
	if vmi.Status.NodeName != node {
		t.Fatalf("instance on %q, want %q", vmi.Status.NodeName, node)
	}
	waitUptime(t, f, vmi)

	ws, resp, err := dialConsole(t, f, f.Namespace, "far")
	if err != nil {
		t.Fatalf("console: %v (%+v)", err, resp)
	}
	v := newViewer(t, ws)
	v.typeUntil(t, "\n", "podvirt-demo#", 24)
	v.typeUntil(t, "echo far-$((6*7))\n", "far-42", 6)

	// Pause reaches that node's agent (a second pause is refused by it: the guest is paused).
	vmis := "/namespaces/" + f.Namespace + "/virtualmachineinstances/"
	put(f, vmis+"far/pause", "", 202, "")
	f.Eventually("a second pause refused", time.Minute, func(ctx context.Context) (bool, error) {
		err := f.Clientset.Discovery().RESTClient().Put().AbsPath("/apis/subresources.kubevirt.io/v1" + vmis + "far/pause").Do(ctx).Error()
		return err != nil && strings.Contains(err.Error(), "is already paused"), fmt.Errorf("second pause: %v", err)
	})
	put(f, vmis+"far/unpause", "", 202, "")
	waitUptime(t, f, vmi)
}
