//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

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

// otherNode is a Ready node that is not this machine itself.
func otherNode(t *testing.T, f *framework.Framework) string {
	t.Helper()
	host := f.HostNode()
	for _, n := range readyNodes(t, f, e2eNodes) {
		if n != host {
			return n
		}
	}
	t.Fatalf("no Ready node besides %s", host)
	return ""
}

// preferNode is an affinity for node that lets the scheduler go elsewhere when node cannot take the Pod.
func preferNode(node string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 100, Preference: corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}}
}

// pinned puts pod on node.
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

// A lost node, in the order that tests rule 3 of docs/node-loss.md: its node agent goes away first
// (its DaemonSet leaves the node) and the guest keeps running past the launcher's 40 s on its
// kubelet's word; then the kubelet stops too (the node stops answering; its containers keep
// running). The launcher, with neither its agent nor a kubelet renewal to go by, stops the guest
// itself; once both leases are older than the threshold the controllers fail the instance
// (NodeUnresponsive) and the VM (runStrategy Always) runs again on the other node. At no moment do
// two guests of the VM run on the machine.
func TestNodeLossRestartsTheVMElsewhere(t *testing.T) {
	f := framework.New(t)
	requireVirtAPI(f)
	far, host := otherNode(t, f), f.HostNode()
	// virt-api serves the admission webhooks (failurePolicy Fail) every new instance passes and
	// the launchers' kubelet-lease checks: it must not be lost with the node.
	moveDeploymentsOff(t, f, far)
	vm := demoVM(f.Namespace, "phoenix", virtv1.RunStrategyAlways, 0, "")
	vm.Spec.Template.Spec.Affinity = preferNode(far)
	f.Create(vm)
	first := waitRunning(t, f, "phoenix", "")
	if first.Status.NodeName != far {
		t.Fatalf("instance on %q, want %q (preferred)", first.Status.NodeName, far)
	}
	waitUptime(t, f, first)

	guests := countGuests(t, f.Namespace, "phoenix")
	keepAgentOff(t, f, far)
	agentGone := time.Now()
	// A minute without its agent (past the launcher's 40 s): the same instance runs, and its guest
	// answers (one sample may fall on a slow answer).
	unanswered := 0
	err := wait.PollUntilContextTimeout(f.Context(), 5*time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, err := guestUptime(ctx, first); err != nil {
			unanswered++
		}
		now := &virtv1.VirtualMachineInstance{}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(first), now); err != nil {
			return false, err
		}
		if now.UID != first.UID || now.Status.Phase != virtv1.Running || unanswered > 1 {
			return false, fmt.Errorf("instance %s in phase %s, %d samples unanswered", now.UID, now.Status.Phase, unanswered)
		}
		return false, nil
	})
	if !wait.Interrupted(err) {
		t.Fatalf("the guest without its agent for %s: %v", time.Since(agentGone).Round(time.Second), err)
	}
	t.Cleanup(func() { // the kubelet first: the agent comes back only to a running kubelet
		podvirtCluster(t, "up", "--nodes", strconv.Itoa(e2eNodes))
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		letAgentBack(ctx, t, f, far)
		restoreNodes(t, f)
	})
	podvirtCluster(t, "stop-node", far)
	lost := time.Now()

	second := waitFailedOver(t, f, first, 5*time.Minute)
	back := time.Since(lost)
	if most := guests.stop(); most != 1 {
		t.Errorf("at most %d guests of the VM ran at once, want exactly 1 (never two)", most)
	}
	if guests.gone.Before(lost) {
		t.Errorf("the guest stopped %s after its agent went, before its kubelet stopped (%s)", guests.gone.Sub(agentGone).Round(time.Second), lost.Sub(agentGone).Round(time.Second))
	}
	t.Logf("node agent of %s away → guest kept %s → kubelet stopped → guest fenced after %s → the VM running on %s again after %s",
		far, lost.Sub(agentGone).Round(time.Second), guests.gone.Sub(lost).Round(time.Second), second.Status.NodeName, back.Round(time.Second))
	if second.Status.NodeName != host {
		t.Errorf("the VM came back on %q, want %q", second.Status.NodeName, host)
	}
	waitUptime(t, f, second)
	expectNodeUnresponsive(t, f, first)
}

// waitFailedOver waits until first's VM runs a new instance with its network up, and returns it.
func waitFailedOver(t *testing.T, f *framework.Framework, first *virtv1.VirtualMachineInstance, timeout time.Duration) *virtv1.VirtualMachineInstance {
	t.Helper()
	second := &virtv1.VirtualMachineInstance{}
	f.Eventually("the VM running again elsewhere", timeout, func(ctx context.Context) (bool, error) {
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(first), second); err != nil {
			return false, err
		}
		return second.UID != first.UID && second.Status.Phase == virtv1.Running && len(second.Status.Interfaces) > 0,
			fmt.Errorf("uid %s phase %s on %q", second.UID, second.Status.Phase, second.Status.NodeName)
	})
	return second
}

// expectNodeUnresponsive checks the failed-over instance got a NodeUnresponsive Event.
func expectNodeUnresponsive(t *testing.T, f *framework.Framework, lost *virtv1.VirtualMachineInstance) {
	t.Helper()
	events := &corev1.EventList{}
	if err := f.Client.List(f.Context(), events, client.InNamespace(lost.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.InvolvedObject.UID == lost.UID && e.Reason == virtv1.ReasonNodeUnresponsive {
			return
		}
	}
	t.Errorf("no %s Event on the lost instance %s", virtv1.ReasonNodeUnresponsive, lost.UID)
}

// moveDeploymentsOff reschedules Podvirt's Deployment Pods (virt-api, virt-controller) that run on
// node elsewhere: the node is cordoned meanwhile, and uncordoned once they run on another node.
func moveDeploymentsOff(t *testing.T, f *framework.Framework, node string) {
	t.Helper()
	runKubectl(t, "cordon", node)
	defer runKubectl(t, "uncordon", node)
	var pods corev1.PodList
	if err := f.Client.List(f.Context(), &pods, client.InNamespace("podvirt")); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == node && len(p.OwnerReferences) > 0 && p.OwnerReferences[0].Kind == "ReplicaSet" {
			if err := f.Client.Delete(f.Context(), &p); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
		}
	}
	f.Eventually("Podvirt's Deployments available off "+node, 3*time.Minute, func(ctx context.Context) (bool, error) {
		var deps appsv1.DeploymentList
		if err := f.Client.List(ctx, &deps, client.InNamespace("podvirt")); err != nil {
			return false, err
		}
		var now corev1.PodList
		if err := f.Client.List(ctx, &now, client.InNamespace("podvirt")); err != nil {
			return false, err
		}
		for _, d := range deps.Items {
			if d.Status.AvailableReplicas < 1 || d.Status.UpdatedReplicas != d.Status.Replicas || d.Status.Replicas != ptr.Deref(d.Spec.Replicas, 1) {
				return false, fmt.Errorf("deployment %s: %d available, %d replicas", d.Name, d.Status.AvailableReplicas, d.Status.Replicas)
			}
		}
		for _, p := range now.Items {
			if p.Spec.NodeName == node && len(p.OwnerReferences) > 0 && p.OwnerReferences[0].Kind == "ReplicaSet" {
				return false, fmt.Errorf("pod %s still on %s", p.Name, node)
			}
		}
		return true, nil
	})
	requireVirtAPI(f)
}

// guestCounter samples how many qemu processes of one VM run on this machine (every node of the
// local cluster is on it) and keeps the largest count.
type guestCounter struct {
	most int
	// gone is when the count first fell to zero after being positive.
	gone time.Time
	quit chan struct{}
	done chan struct{}
}

func countGuests(t *testing.T, ns, name string) *guestCounter {
	g := &guestCounter{quit: make(chan struct{}), done: make(chan struct{})}
	marker := []byte(qemuMarker(ns, name))
	go func() {
		defer close(g.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			n := 0
			for _, p := range processesWith(marker) {
				if bytes.Contains(p, []byte("qemu-system")) {
					n++
				}
			}
			if n == 0 && g.most > 0 && g.gone.IsZero() {
				g.gone = time.Now()
			}
			g.most = max(g.most, n)
			select {
			case <-g.quit:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { g.stop() })
	return g
}

// stop ends the sampling (once) and returns the largest count seen.
func (g *guestCounter) stop() int {
	select {
	case <-g.quit:
	default:
		close(g.quit)
	}
	<-g.done
	return g.most
}

// processesWith returns the command lines (NUL-separated) of the processes that contain marker.
func processesWith(marker []byte) [][]byte {
	var out [][]byte
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range paths {
		if raw, err := os.ReadFile(p); err == nil && bytes.Contains(raw, marker) {
			out = append(out, raw)
		}
	}
	return out
}

// podvirtCluster runs the local cluster's tool (cmd/podvirt-cluster) from the repository.
func podvirtCluster(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("go", append([]string{"run", "./cmd/podvirt-cluster"}, args...)...)
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("podvirt-cluster %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// restoreNodes starts what stop-node stopped and waits until every node and its agent are back. It
// runs as a cleanup, after the test's context has ended.
func restoreNodes(t *testing.T, f *framework.Framework) {
	podvirtCluster(t, "up", "--nodes", strconv.Itoa(e2eNodes))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var last string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		nodes := &corev1.NodeList{}
		ds := &appsv1.DaemonSet{}
		if err := f.Client.List(ctx, nodes); err != nil {
			last = err.Error()
			return false, nil
		}
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "podvirt", Name: "virt-handler"}, ds); err != nil {
			last = err.Error()
			return false, nil
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		last = fmt.Sprintf("%d Ready nodes, virt-handler ready on %d", ready, ds.Status.NumberReady)
		return ready >= e2eNodes && int(ds.Status.NumberReady) >= e2eNodes, nil
	})
	if err != nil {
		t.Errorf("the nodes did not come back: %v (%s)", err, last)
	}
}

// kubectl drain of a VM's node: the VM (evictionStrategy None, so it cannot move while running) is
// shut down gracefully through its launcher Pod's eviction and, its run strategy being Always, starts
// again on the other node.
func TestDrainRestartsTheVMElsewhere(t *testing.T) {
	f := framework.New(t)
	requireVirtAPI(f)
	far, host := otherNode(t, f), f.HostNode()
	first := runOnNode(t, f, "nomad", far, ptr.To(virtv1.EvictionStrategyNone))
	waitUptime(t, f, first)

	drain(t, f, far, 3*time.Minute)
	second := waitRunning(t, f, "nomad", string(first.UID))
	if second.Status.NodeName != host {
		t.Errorf("the VM came back on %q, want %q", second.Status.NodeName, host)
	}
	waitUptime(t, f, second)
}

// runOnNode creates a demo VM (runStrategy Always, 30 s grace, evictionStrategy when given) that
// prefers node, and waits for its instance to run there.
func runOnNode(t *testing.T, f *framework.Framework, name, node string, eviction *virtv1.EvictionStrategy) *virtv1.VirtualMachineInstance {
	t.Helper()
	vm := demoVM(f.Namespace, name, virtv1.RunStrategyAlways, 30, "")
	vm.Spec.Template.Spec.EvictionStrategy = eviction
	vm.Spec.Template.Spec.Affinity = preferNode(node)
	f.Create(vm)
	vmi := waitRunning(t, f, name, "")
	if vmi.Status.NodeName != node {
		t.Fatalf("instance on %q, want %q (preferred)", vmi.Status.NodeName, node)
	}
	return vmi
}

// drain runs kubectl drain of node (uncordoned at cleanup) and returns how long it took. virt-api
// sees each launcher eviction and its webhook fails closed, so Podvirt's Deployments are moved off
// the node first.
func drain(t *testing.T, f *framework.Framework, node string, timeout time.Duration) time.Duration {
	t.Helper()
	moveDeploymentsOff(t, f, node)
	t.Cleanup(func() { runKubectl(t, "uncordon", node) })
	start := time.Now()
	runKubectl(t, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout="+timeout.String())
	return time.Since(start)
}

// runKubectl runs the cluster's kubectl and fails the test with its output when it fails.
func runKubectl(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(kubectl(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
