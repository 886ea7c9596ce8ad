//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// chaosFault is one fault of make chaos: run injects it, waits it out and ends it. Before a fault
// may stop a guest it names the VM with c.mayStop; any other guest that ends is a failure.
type chaosFault struct {
	name string
	run  func(c *chaosRun)
	// moves: the fault fails the second node's VMs over to the first; once the cluster has
	// converged they are restarted back (chaosRun.rebalance), so that later faults of that node
	// find guests there.
	moves bool
}

// instantFaults are over as soon as they are injected; the chaos run fills its window with them.
func instantFaults() []chaosFault {
	return []chaosFault{
		{name: "kill the virt-controller leader", run: killControllerLeader},
		{name: "kill a virt-api replica", run: killVirtAPIReplica},
		{name: "kill a qemu", run: killSomeQemu},
		{name: "delete a launcher Pod", run: deleteSomeLauncher},
		{name: "kill the second node's agent", run: killAgent},
	}
}

// shortFaults are the faults of the short variant (make test), besides the instant ones.
func shortFaults() []chaosFault {
	return []chaosFault{
		{name: "kube-apiserver away 30s", run: apiserverAway(30 * time.Second)},
		{name: "second node's clock +90s, first's -90s", run: skewClocks(90*time.Second, time.Minute)},
	}
}

// fullFaults are the faults of make chaos, besides the instant ones.
func fullFaults() []chaosFault {
	return []chaosFault{
		{name: "kube-apiserver away 30s", run: apiserverAway(30 * time.Second)},
		{name: "kube-apiserver away 2m", run: apiserverAway(2 * time.Minute)},
		{name: "kube-apiserver away 5m", run: apiserverAway(5 * time.Minute)},
		{name: "second node's agent away 10m", run: agentAwayFor(10 * time.Minute)},
		{name: "second node's clock +90s, first's -90s", run: skewClocks(90*time.Second, 2*time.Minute)},
		{name: "second node's clock -90s, first's +90s", run: skewClocks(-90*time.Second, 2*time.Minute)},
		{name: "second node cut off 3m", run: cutOff(3 * time.Minute), moves: true},
		{name: "second node stopped (kubelet, agent, qemus)", run: stopSecondNode, moves: true},
		{name: "launcher Pod force-deleted, its kubelet stopped", run: forceDeleteWhileKubeletStopped, moves: true},
	}
}

func killControllerLeader(c *chaosRun) {
	lease := &coordinationv1.Lease{}
	if err := c.f.Client.Get(c.f.Context(), client.ObjectKey{Namespace: heartbeatv1.Namespace, Name: "virt-controller.kubevirt.io"}, lease); err != nil || lease.Spec.HolderIdentity == nil {
		c.t.Errorf("virt-controller's leader lease: %v", err)
		return
	}
	pod, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
	c.deletePod(heartbeatv1.Namespace, pod, 0)
}

// killVirtAPIReplica kills one of virt-api's two replicas once both are Ready. The guests'
// convergence after the fault before does not wait for virt-api: a replica killed just before may
// still be replaced (a CI run drew two kills 6 s apart after the apiserver had been away, and found
// one Pod).
func killVirtAPIReplica(c *chaosRun) {
	var pods []corev1.Pod
	err := c.f.Poll(2*time.Minute, func(context.Context) (bool, error) {
		pods = pods[:0]
		for _, p := range c.podvirtPods("virt-api", "") {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					pods = append(pods, p)
				}
			}
		}
		return len(pods) >= 2, nil
	})
	if err != nil {
		c.t.Errorf("%d virt-api Pods Ready, want 2 to kill one: %v", len(pods), err)
		return
	}
	c.deletePod(heartbeatv1.Namespace, pods[c.rng.IntN(len(pods))].Name, 0)
}

func killAgent(c *chaosRun) {
	for _, p := range c.podvirtPods("virt-handler", c.far) {
		c.deletePod(heartbeatv1.Namespace, p.Name, 0)
	}
}

func killSomeQemu(c *chaosRun) {
	vm := c.someRunning("")
	if vm == "" {
		return
	}
	c.mayStop(vm)
	for _, pid := range c.sampler.pids(vm) {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			c.t.Errorf("kill the qemu of %s (%d): %v", vm, pid, err)
		}
	}
	c.waitEnded(vm)
}

func deleteSomeLauncher(c *chaosRun) {
	vm, pod := c.someLauncher("")
	if pod == "" {
		return
	}
	c.mayStop(vm)
	c.deletePod(c.f.Namespace, pod, -1)
	c.waitEnded(vm)
}

// someLauncher picks a VM whose guest runs (on node, when given) and names its launcher Pod; ""
// when none runs.
func (c *chaosRun) someLauncher(node string) (vm, pod string) {
	vm = c.someRunning(node)
	if vm == "" {
		return "", ""
	}
	vmi := &virtv1.VirtualMachineInstance{}
	if err := c.f.Client.Get(c.f.Context(), client.ObjectKey{Namespace: c.f.Namespace, Name: vm}, vmi); err != nil {
		c.t.Errorf("instance %s: %v", vm, err)
		return "", ""
	}
	return vm, vmi.Status.LauncherPod
}

func apiserverAway(d time.Duration) func(*chaosRun) {
	return func(c *chaosRun) {
		podvirtCluster(c.t, "stop-apiserver")
		c.sleep(d)
		podvirtCluster(c.t, "up", "--nodes", strconv.Itoa(e2eNodes))
	}
}

func agentAwayFor(d time.Duration) func(*chaosRun) {
	return func(c *chaosRun) {
		keepAgentOff(c.t, c.f, c.far)
		c.sleep(d)
		letAgentBack(c.f.Context(), c.t, c.f, c.far)
	}
}

// skewClocks restarts the agents with the second node's clock off by skew and the first's by
// -skew, holds that, then restarts them with true clocks.
func skewClocks(skew, hold time.Duration) func(*chaosRun) {
	return func(c *chaosRun) {
		c.setAgentArg(c.f.Context(), "--fault-clock-skew=", fmt.Sprintf("%s=%s,%s=%s", c.far, skew, c.host, -skew))
		c.sleep(hold)
		c.setAgentArg(c.f.Context(), "--fault-clock-skew=", "")
	}
}

// cutOff takes the second node's link down for d (Podvirt's Deployments moved off it first: they
// serve the webhooks and fail instances over).
func cutOff(d time.Duration) func(*chaosRun) {
	return func(c *chaosRun) {
		moveDeploymentsOff(c.t, c.f, c.far)
		c.mayStop(c.runningOn(c.far)...)
		podvirtCluster(c.t, "cut-node", c.far)
		c.sleep(d)
		podvirtCluster(c.t, "heal-node", c.far)
		restoreNodes(c.t, c.f)
	}
}

// stopSecondNode stops the second node's kubelet and kills every process of its Pods (its agent,
// its launchers and their qemus), waits until its VMs that should run again do so elsewhere, and
// starts the node again.
func stopSecondNode(c *chaosRun) {
	moveDeploymentsOff(c.t, c.f, c.far)
	lost := c.runningOn(c.far)
	c.mayStop(lost...)
	var uids []string
	pods := &corev1.PodList{}
	if err := c.f.Client.List(c.f.Context(), pods, client.MatchingFields{"spec.nodeName": c.far}); err != nil {
		c.t.Errorf("Pods on %s: %v", c.far, err)
		return
	}
	for _, p := range pods.Items {
		uids = append(uids, string(p.UID))
	}
	podvirtCluster(c.t, "stop-node", c.far)
	killed := killPodProcesses(uids)
	c.t.Logf("%s stopped: kubelet, and %d processes of its %d Pods", c.far, killed, len(uids))
	c.waitRunningElsewhere(lost, 5*time.Minute)
	podvirtCluster(c.t, "up", "--nodes", strconv.Itoa(e2eNodes))
	restoreNodes(c.t, c.f)
}

// forceDeleteWhileKubeletStopped stops the second node's kubelet and force-deletes a launcher Pod
// there while its guest still runs: the Pod is gone from the API at once, its containers are not.
func forceDeleteWhileKubeletStopped(c *chaosRun) {
	vm, pod := c.someLauncher(c.far)
	if pod == "" {
		c.t.Logf("no VM runs on %s: nothing to force-delete", c.far)
		return
	}
	c.mayStop(vm)
	podvirtCluster(c.t, "stop-node", c.far)
	c.deletePod(c.f.Namespace, pod, 0)
	c.sleep(2 * time.Minute)
	podvirtCluster(c.t, "up", "--nodes", strconv.Itoa(e2eNodes))
	restoreNodes(c.t, c.f)
}

// killPodProcesses SIGKILLs every process on this machine in the cgroup of one of the Pods (by UID,
// as the kubelet names the cgroups: pod<uid>, with - or _) and returns how many it killed.
func killPodProcesses(uids []string) int {
	killed := 0
	paths, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, uid := range uids {
			if strings.Contains(string(raw), "pod"+uid) || strings.Contains(string(raw), "pod"+strings.ReplaceAll(uid, "-", "_")) {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					killed++
				}
				break
			}
		}
	}
	return killed
}

// deletePod deletes a Pod with grace seconds (-1: its own).
func (c *chaosRun) deletePod(ns, name string, grace int64) {
	opts := []client.DeleteOption{}
	if grace >= 0 {
		opts = append(opts, client.GracePeriodSeconds(grace))
	}
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = ns, name
	if err := c.f.Client.Delete(c.f.Context(), pod, opts...); client.IgnoreNotFound(err) != nil {
		c.t.Errorf("delete Pod %s/%s: %v", ns, name, err)
	}
}

// podvirtPods lists Podvirt's Pods of one app (on node, when given).
func (c *chaosRun) podvirtPods(app, node string) []corev1.Pod {
	pods := &corev1.PodList{}
	if err := c.f.Client.List(c.f.Context(), pods, client.InNamespace(heartbeatv1.Namespace), client.MatchingLabels{"app.kubernetes.io/name": app}); err != nil {
		c.t.Errorf("list %s Pods: %v", app, err)
		return nil
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && (node == "" || p.Spec.NodeName == node) {
			out = append(out, p)
		}
	}
	return out
}

// setAgentArg replaces the agent's argument starting with prefix by prefix+value (removes it when
// value is empty) and waits until the DaemonSet has rolled out; nothing when it is so already.
func (c *chaosRun) setAgentArg(ctx context.Context, prefix, value string) {
	ds := agentDaemonSet(ctx, c.t, c.f)
	orig := ds.DeepCopy()
	ctr := &ds.Spec.Template.Spec.Containers[0]
	args := ctr.Args[:0:0]
	for _, a := range ctr.Args {
		if !strings.HasPrefix(a, prefix) {
			args = append(args, a)
		}
	}
	if value != "" {
		args = append(args, prefix+value)
	}
	if slices.Equal(args, ctr.Args) {
		return
	}
	ctr.Args = args
	if err := c.f.Client.Patch(ctx, ds, client.MergeFrom(orig)); err != nil {
		c.t.Errorf("set the agent's %s%s: %v", prefix, value, err)
		return
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		now := &appsv1.DaemonSet{}
		if err := c.f.Client.Get(ctx, client.ObjectKeyFromObject(ds), now); err != nil {
			last = err.Error()
			return false, nil
		}
		s := now.Status
		last = fmt.Sprintf("%d of %d updated, %d ready", s.UpdatedNumberScheduled, s.DesiredNumberScheduled, s.NumberReady)
		return s.ObservedGeneration >= now.Generation && s.UpdatedNumberScheduled == s.DesiredNumberScheduled && s.NumberReady == s.DesiredNumberScheduled, nil
	})
	if err != nil {
		c.t.Errorf("the agents with %s%s: %v (%s)", prefix, value, err, last)
	}
}
