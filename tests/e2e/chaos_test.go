//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// chaosPlan is what a chaos run does: PODVIRT_CHAOS=full is make chaos (20 VMs, every fault of
// fullFaults and instantFaults; its long faults alone take more than its 10-minute window);
// otherwise the short variant of make test (6 VMs, shortFaults and instantFaults, then instant
// faults until 3 minutes have passed). PODVIRT_CHAOS_SEED repeats a run's order.
type chaosPlan struct {
	vms    int
	window time.Duration
	faults []chaosFault
	seed   uint64
}

func chaosPlanFromEnv(t *testing.T) chaosPlan {
	p := chaosPlan{vms: 6, window: 3 * time.Minute, faults: shortFaults(), seed: uint64(time.Now().UnixNano())}
	if os.Getenv("PODVIRT_CHAOS") == "full" {
		p.vms, p.window, p.faults = 20, 10*time.Minute, fullFaults()
	}
	if s := os.Getenv("PODVIRT_CHAOS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("PODVIRT_CHAOS_SEED=%q: want an unsigned integer", s)
		}
		p.seed = seed
	}
	return p
}

// chaosRun is one run's state.
type chaosRun struct {
	t         *testing.T
	f         *framework.Framework
	rng       *rand.Rand
	far, host string
	vms       []chaosVM
	sampler   *qemuSampler
	// allowed are the guests a fault may stop, each from when the fault began until the cluster
	// converged after it.
	allowed []allowance
	acked   map[string]map[string]int // records VM → boot → the last record it said it synced
	results []faultResult
}

type chaosVM struct {
	name     string
	strategy virtv1.VirtualMachineRunStrategy
	records  bool
	prefers  string // the node its instances prefer
}

// allowance lets a fault stop the guests of a VM that run when it begins (their qemu PIDs).
type allowance struct {
	vm   string
	pids []int
	from time.Time
}

type faultResult struct {
	fault    string
	stops    int // guests it was allowed to stop that ended
	converge time.Duration
	settled  bool
}

// Faults at random — the control plane, the agents, the guests, the second node and its clock —
// while guests of every run strategy run, some appending numbered records to their claims. After
// each fault the cluster must converge: every VM as its run strategy says, one qemu per running VM.
// Throughout, no guest stops that the fault should not stop, no VM ever runs twice (qemus sampled
// every 100 ms), and at the end no launcher Pod is orphaned and no synced record is lost.
func TestChaos(t *testing.T) {
	f := framework.New(t)
	requireVirtAPI(f)
	plan := chaosPlanFromEnv(t)
	c := &chaosRun{t: t, f: f, rng: rand.New(rand.NewPCG(plan.seed, 0)), far: otherNode(t, f), host: f.HostNode(), acked: map[string]map[string]int{}}
	t.Logf("chaos: %d VMs, %s, seed %d (PODVIRT_CHAOS_SEED repeats the order)", plan.vms, plan.window, plan.seed)
	// Cleanups run last first: the nodes back, then the agents' clocks true again.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // the test's is over
		defer cancel()
		c.setAgentArg(ctx, "--fault-clock-skew=", "")
	})
	t.Cleanup(func() { restoreNodes(t, f) }) // whatever a failed fault left behind
	c.createVMs(plan.vms)
	c.sampler = sampleQemus(f.Namespace)
	t.Cleanup(c.sampler.stop)
	c.settle("start")

	// Every fault once, in random order; then instant faults at random until the window has passed.
	faults := append(plan.faults, instantFaults()...)
	c.rng.Shuffle(len(faults), func(i, j int) { faults[i], faults[j] = faults[j], faults[i] })
	begin := time.Now()
	for i := 0; i < len(faults) || time.Since(begin) < plan.window; i++ {
		if i >= len(faults) {
			instants := instantFaults()
			faults = append(faults, instants[c.rng.IntN(len(instants))])
		}
		c.inject(faults[i], time.Since(begin))
		if t.Failed() {
			break
		}
	}
	c.report(time.Since(begin))
	c.checkOrphans()
	c.checkRecords()
}

// createVMs creates n VMs: run strategies Always, RerunOnFailure and Manual in turn, every second
// one with a claim its guest appends records to, two by two preferring each node; and waits until
// every guest answers.
func (c *chaosRun) createVMs(n int) {
	strategies := []virtv1.VirtualMachineRunStrategy{virtv1.RunStrategyAlways, virtv1.RunStrategyRerunOnFailure, virtv1.RunStrategyManual}
	for i := range n {
		vm := chaosVM{name: fmt.Sprintf("%s-%d", strings.ToLower(string(strategies[i%3])), i), strategy: strategies[i%3], records: i%2 == 1, prefers: []string{c.host, c.far}[i/2%2]}
		c.vms = append(c.vms, vm)
		userData := ""
		if vm.records {
			userData = recordsUserData
			c.f.Create(&corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: vm.name},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("8Mi")}},
				},
			})
		}
		spec := demoVM(c.f.Namespace, vm.name, vm.strategy, 30, userData)
		spec.Spec.Template.Spec.Affinity = preferNode(vm.prefers)
		// The demo guest idles: 20m of CPU (not the default 100m) lets one node of this 2-core
		// machine hold every VM when the other is lost.
		spec.Spec.Template.Spec.Domain.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("20m")
		if vm.records {
			s := &spec.Spec.Template.Spec
			s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, virtv1.Disk{Name: "data", Serial: "data", Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}})
			s.Volumes = append(s.Volumes, virtv1.Volume{Name: "data", VolumeSource: virtv1.VolumeSource{PersistentVolumeClaim: &virtv1.PersistentVolumeClaimVolumeSource{ClaimName: vm.name}}})
		}
		c.f.Create(spec)
		if vm.strategy == virtv1.RunStrategyManual {
			c.f.Eventually("start "+vm.name, time.Minute, func(ctx context.Context) (bool, error) {
				err := c.f.Clientset.Discovery().RESTClient().Put().
					AbsPath("/apis/subresources.kubevirt.io/v1/namespaces", c.f.Namespace, "virtualmachines", vm.name, "start").
					Body([]byte("{}")).Do(ctx).Error()
				// A start whose answer was lost leaves the VM running: the next call says so.
				return err == nil || strings.Contains(err.Error(), "VM is already running"), err
			})
		}
	}
	for _, vm := range c.vms {
		vmi := waitRunning(c.t, c.f, vm.name, "")
		waitUptime(c.t, c.f, vmi)
	}
}

// inject runs one fault and waits until the cluster converges after it; after a fault that moved
// VMs off the second node, it restarts them back and waits again.
func (c *chaosRun) inject(fault chaosFault, at time.Duration) {
	c.t.Logf("%6s  %s", at.Round(time.Second), fault.name)
	c.measure(fault.name, fault.run)
	if fault.moves && !c.t.Failed() {
		c.measure("VMs restarted back onto the second node", func(c *chaosRun) { c.rebalance() })
	}
}

// measure runs act, waits until the cluster converges, and records the outcome as name's.
func (c *chaosRun) measure(name string, act func(*chaosRun)) {
	c.noteRecords(c.f.Context())
	from := len(c.allowed)
	act(c)
	r := c.settle(name)
	ended := c.sampler.results().ended
	for _, a := range c.allowed[from:] {
		for _, e := range ended {
			if e.vm == a.vm && slices.Contains(a.pids, e.pid) {
				r.stops++
			}
		}
	}
	c.results = append(c.results, r)
}

// mayStop allows the current fault to stop the guests of vms that run now.
func (c *chaosRun) mayStop(vms ...string) {
	for _, vm := range vms {
		c.allowed = append(c.allowed, allowance{vm: vm, pids: c.sampler.pids(vm), from: time.Now()})
	}
}

// rebalance restarts the running VMs that prefer the second node but run on the first (after a
// fault failed them over), so the next fault of that node finds guests there, and waits until
// their guests have stopped (their new instances are awaited by settle).
func (c *chaosRun) rebalance() {
	onFirst := c.runningOn(c.host)
	var moved []string
	for _, vm := range c.vms {
		if vm.prefers != c.far || !slices.Contains(onFirst, vm.name) {
			continue
		}
		c.mayStop(vm.name)
		err := c.f.Clientset.Discovery().RESTClient().Put().
			AbsPath("/apis/subresources.kubevirt.io/v1/namespaces", c.f.Namespace, "virtualmachines", vm.name, "restart").
			Body([]byte("{}")).Do(c.f.Context()).Error()
		if err != nil {
			c.t.Errorf("restart %s: %v", vm.name, err)
			continue
		}
		moved = append(moved, vm.name)
	}
	for _, vm := range moved {
		c.waitEnded(vm)
	}
	c.t.Logf("restarted %d VMs that prefer %s: %v", len(moved), c.far, moved)
}

// waitEnded waits until a guest of vm is seen gone since the fault began.
func (c *chaosRun) waitEnded(vm string) {
	var from time.Time
	for _, a := range c.allowed {
		if a.vm == vm {
			from = a.from
		}
	}
	c.f.Eventually("the guest of "+vm+" gone", 2*time.Minute, func(context.Context) (bool, error) {
		for _, e := range c.sampler.results().ended {
			if e.vm == vm && !e.at.Before(from) {
				return true, nil
			}
		}
		return false, nil
	})
}

// sleep waits d (the sampler goes on), or until the test ends.
func (c *chaosRun) sleep(d time.Duration) {
	select {
	case <-time.After(d):
	case <-c.f.Context().Done():
	}
}

// someRunning is a VM picked at random whose guest runs (on node, when given); "" when none does.
func (c *chaosRun) someRunning(node string) string {
	var running []string
	if node != "" {
		running = c.runningOn(node)
	} else {
		for _, vm := range c.vms {
			if c.sampler.count(vm.name) == 1 {
				running = append(running, vm.name)
			}
		}
	}
	if len(running) == 0 {
		c.t.Logf("no guest runs to fault")
		return ""
	}
	return running[c.rng.IntN(len(running))]
}

// runningOn are the VMs whose instance runs on node, as the API says.
func (c *chaosRun) runningOn(node string) []string {
	list := &virtv1.VirtualMachineInstanceList{}
	if err := c.f.Client.List(c.f.Context(), list, client.InNamespace(c.f.Namespace)); err != nil {
		c.t.Errorf("list instances: %v", err)
		return nil
	}
	var out []string
	for _, vmi := range list.Items {
		if vmi.Status.NodeName == node && vmi.Status.Phase == virtv1.Running {
			out = append(out, vmi.Name)
		}
	}
	return out
}

// waitRunningElsewhere waits until those of vms that should run again (Always, RerunOnFailure) run
// a new instance off the second node.
func (c *chaosRun) waitRunningElsewhere(vms []string, timeout time.Duration) {
	start := time.Now()
	err := c.f.Poll(timeout, func(ctx context.Context) (bool, error) {
		for _, name := range vms {
			if c.strategy(name) == virtv1.RunStrategyManual {
				continue
			}
			vmi := &virtv1.VirtualMachineInstance{}
			if err := c.f.Client.Get(ctx, client.ObjectKey{Namespace: c.f.Namespace, Name: name}, vmi); err != nil {
				return false, err
			}
			if vmi.Status.NodeName == c.far || vmi.Status.Phase != virtv1.Running {
				return false, fmt.Errorf("%s: phase %s on %q", name, vmi.Status.Phase, vmi.Status.NodeName)
			}
		}
		return true, nil
	})
	if err != nil {
		c.t.Errorf("the VMs of the stopped node running elsewhere: %v", err)
		return
	}
	c.t.Logf("the VMs of the stopped node %v run elsewhere after %s", vms, time.Since(start).Round(time.Second))
}

func (c *chaosRun) strategy(name string) virtv1.VirtualMachineRunStrategy {
	for _, vm := range c.vms {
		if vm.name == name {
			return vm.strategy
		}
	}
	return ""
}

// settle waits (at most 8 minutes) until the cluster has converged and stays so for settled.
func (c *chaosRun) settle(after string) faultResult {
	start := time.Now()
	var since time.Time // when it was first seen converged, in a row of checks that all saw it so
	err := c.f.Poll(8*time.Minute, func(ctx context.Context) (bool, error) {
		err := c.converged(ctx)
		switch {
		case err != nil:
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		}
		return err == nil && time.Since(since) >= settled, err
	})
	r := faultResult{fault: after, converge: time.Since(start), settled: err == nil}
	if err != nil {
		c.t.Errorf("after %s the cluster did not converge: %v", after, err)
	} else {
		r.converge -= settled
	}
	return r
}

// settled is how long the cluster must stay converged to count as settled.
const settled = 5 * time.Second

// converged names what is not yet as it should be, or is nil: Podvirt's agents and Deployments all
// Ready, Always and RerunOnFailure VMs running one guest that answers, and each Manual VM either so
// or (stopped by a fault) with no guest and no running instance.
func (c *chaosRun) converged(ctx context.Context) error {
	if err := podvirtReady(ctx, c.f); err != nil {
		return err
	}
	list := &virtv1.VirtualMachineInstanceList{}
	if err := c.f.Client.List(ctx, list, client.InNamespace(c.f.Namespace)); err != nil {
		return err
	}
	vmis := map[string]*virtv1.VirtualMachineInstance{}
	for i := range list.Items {
		vmis[list.Items[i].Name] = &list.Items[i]
	}
	for _, vm := range c.vms {
		vmi, n := vmis[vm.name], c.sampler.count(vm.name)
		running := vmi != nil && vmi.Status.Phase == virtv1.Running && len(vmi.Status.Interfaces) > 0 && vmi.DeletionTimestamp == nil
		stopped := n == 0 && (vmi == nil || vmi.Status.Phase.IsFinal())
		if !(running && n == 1 || vm.strategy == virtv1.RunStrategyManual && stopped) {
			phase := virtv1.VirtualMachineInstancePhase("absent")
			if vmi != nil {
				phase = vmi.Status.Phase
			}
			return fmt.Errorf("%s (%s): instance %s, %d qemus", vm.name, vm.strategy, phase, n)
		}
		if running {
			if _, err := guestUptime(ctx, vmi); err != nil {
				return fmt.Errorf("%s: the guest does not answer: %w", vm.name, err)
			}
		}
	}
	c.noteRecords(ctx)
	return nil
}

// podvirtReady names what of Podvirt is not Ready, or is nil: the agent on every node, every
// replica of its Deployments.
func podvirtReady(ctx context.Context, f *framework.Framework) error {
	ds := &appsv1.DaemonSet{}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: heartbeatv1.Namespace, Name: "virt-handler"}, ds); err != nil {
		return err
	}
	if s := ds.Status; s.ObservedGeneration < ds.Generation || s.DesiredNumberScheduled != e2eNodes || s.NumberReady != e2eNodes || s.UpdatedNumberScheduled != e2eNodes {
		return fmt.Errorf("node agents: %d of %d Ready, %d updated", s.NumberReady, s.DesiredNumberScheduled, s.UpdatedNumberScheduled)
	}
	deps := &appsv1.DeploymentList{}
	if err := f.Client.List(ctx, deps, client.InNamespace(heartbeatv1.Namespace)); err != nil {
		return err
	}
	for _, d := range deps.Items {
		want := ptr.Deref(d.Spec.Replicas, 1)
		if s := d.Status; s.ObservedGeneration < d.Generation || s.ReadyReplicas != want || s.UpdatedReplicas != want || s.Replicas != want {
			return fmt.Errorf("deployment %s: %d of %d Ready", d.Name, s.ReadyReplicas, want)
		}
	}
	return nil
}

// noteRecords asks every running records guest for the last record it synced.
func (c *chaosRun) noteRecords(ctx context.Context) {
	list := &virtv1.VirtualMachineInstanceList{}
	if err := c.f.Client.List(ctx, list, client.InNamespace(c.f.Namespace)); err != nil {
		return
	}
	for _, vmi := range list.Items {
		if vmi.Status.Phase != virtv1.Running || len(vmi.Status.Interfaces) == 0 || !c.records(vmi.Name) {
			continue
		}
		if n, boot, err := guestRecords(ctx, vmi.Status.Interfaces[0].IP); err == nil {
			if c.acked[vmi.Name] == nil {
				c.acked[vmi.Name] = map[string]int{}
			}
			c.acked[vmi.Name][boot] = max(c.acked[vmi.Name][boot], n)
		}
	}
}

func (c *chaosRun) records(name string) bool {
	for _, vm := range c.vms {
		if vm.name == name {
			return vm.records
		}
	}
	return false
}
