//go:build bench

package bench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/scheme"
)

// scaleTimeout bounds each phase of a scale run.
const scaleTimeout = 15 * time.Minute

// BenchmarkScale runs the real virt-controller against a real apiserver with kwok nodes (`make
// bench-scale`): for each size in BENCH_SCALE_SIZES (default 100,1000) on BENCH_SCALE_NODES (default
// 100) nodes, a fresh control plane (kube-scheduler's client at BENCH_SCALE_SCHEDULER_QPS, default 50
// as kube-scheduler's own default); N VMs with runStrategy Always created at once, until every VMI
// is Scheduled and every VM Running (the node agent's part played by agentSim: Scheduled → Running);
// the same N as plain Pods through one ReplicaSet; then all stopped. It prints times, P50/P95 per
// object, apiserver writes per object, every component's CPU per object, virt-controller's peak RSS,
// and the VM:Pod ratio; it asserts nothing about them.
func BenchmarkScale(b *testing.B) {
	ctrllog.SetLogger(logr.Discard()) // the benchmark's cache logs nothing worth reading
	nodes := envInt(b, "BENCH_SCALE_NODES", 100)
	schedulerQPS := envInt(b, "BENCH_SCALE_SCHEDULER_QPS", 50)
	var sizes []int
	for _, s := range strings.Split(envString("BENCH_SCALE_SIZES", "100,1000"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			b.Fatalf("BENCH_SCALE_SIZES=%q: want sizes like 100,1000", os.Getenv("BENCH_SCALE_SIZES"))
		}
		sizes = append(sizes, n)
	}
	var runs []scaleRun
	for _, n := range sizes {
		r := runScale(b, n, nodes, schedulerQPS)
		fmt.Println(r.report()) // b.Log would cut a benchmark's output to a few lines
		runs = append(runs, r)
	}
	fmt.Println(growthReport(runs))
	last := runs[len(runs)-1]
	b.ReportMetric(last.vmsAll.Seconds()/last.podsAll.Seconds(), "vm/pod-all-running")
	b.ReportMetric(mib(last.rss), "controller-MiB")
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// scaleRun is what one size measured.
type scaleRun struct {
	n, nodes, schedulerQPS        int
	vmLatency, podLatency         []float64 // seconds, per object
	vmsScheduled, vmsAll          time.Duration
	podsAll, vmsStopped, podsGone time.Duration
	vmWrites, podWrites           map[string]float64
	cpuStart, cpuStop             time.Duration            // virt-controller's
	vmCPU, podCPU                 map[string]time.Duration // every component's, to all Running
	rss                           int64
	simConflicts                  int
	steps                         []time.Duration // first create → the last VMI created, launcher Pod created, launcher Pod Running
}

func runScale(b *testing.B, n, nodes, schedulerQPS int) scaleRun {
	ctx := b.Context()
	cp, err := startControlPlane(ctx, nodes, schedulerQPS)
	if err != nil {
		b.Fatal(err)
	}
	defer cp.stop()
	watchCtx, stopWatching := context.WithCancel(ctx)
	const ns = "scale"
	if err := cp.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	w := newWatcher(b, watchCtx, cp, ns)
	defer w.stop() // before cp.stop: the watcher must not outlive its apiserver
	defer stopWatching()
	r := scaleRun{n: n, nodes: nodes, schedulerQPS: schedulerQPS}

	cpu0, w0 := cp.usage(b)
	t0 := time.Now()
	parallel(b, n, func(i int) error { return cp.client.Create(ctx, scaleVM(ns, i)) })
	w.waitFor(b, cp, "every VMI Scheduled", func() bool { return w.len(w.vmiScheduled) == n })
	r.vmsScheduled = time.Since(t0)
	for _, m := range []map[string]time.Time{w.vmiSeen, w.launcherSeen, w.launcherRunning} {
		w.waitFor(b, cp, "every step seen", func() bool { return w.len(m) >= n })
		r.steps = append(r.steps, slices.MaxFunc(w.snapshot(m), time.Time.Compare).Sub(t0))
	}
	w.waitFor(b, cp, "every VM Running", func() bool { return w.len(w.vmRunning) == n })
	r.vmsAll = time.Since(t0)
	cpu1, w1 := cp.usage(b)
	r.cpuStart, r.vmWrites, r.vmCPU = cpu1[controllerComponent]-cpu0[controllerComponent], diff(w1, w0, n), cpuDiff(cpu1, cpu0)
	for _, t := range w.snapshot(w.vmRunning) { // from the first create, as the Pods from the ReplicaSet's
		r.vmLatency = append(r.vmLatency, t.Sub(t0).Seconds())
	}

	t1 := time.Now()
	parallel(b, n, func(i int) error {
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"runStrategy":"Halted"}}`))
		return cp.client.Patch(ctx, &virtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vmName(i)}}, patch)
	})
	w.waitFor(b, cp, "every VM Stopped and its instance gone", func() bool {
		return w.len(w.vmStopped) == n && w.count(ctx, &virtv1.VirtualMachineInstanceList{}) == 0
	})
	r.vmsStopped = time.Since(t1)
	cpu2, _ := cp.usage(b)
	r.cpuStop = cpu2[controllerComponent] - cpu1[controllerComponent]
	w.mu.Lock()
	r.simConflicts = w.conflicts
	w.mu.Unlock()

	cpu3, w2 := cp.usage(b)
	t2 := time.Now()
	if err := cp.client.Create(ctx, scaleReplicaSet(ns, n)); err != nil {
		b.Fatal(err)
	}
	w.waitFor(b, cp, "every Pod Running", func() bool { return w.len(w.podRunning) == n })
	r.podsAll = time.Since(t2)
	cpu4, w3 := cp.usage(b)
	r.podWrites, r.podCPU = diff(w3, w2, n), cpuDiff(cpu4, cpu3)
	for _, t := range w.snapshot(w.podRunning) {
		r.podLatency = append(r.podLatency, t.Sub(t2).Seconds())
	}
	t3 := time.Now()
	if err := cp.client.Delete(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pods"}}); err != nil {
		b.Fatal(err)
	}
	w.waitFor(b, cp, "every Pod gone", func() bool {
		return w.count(ctx, &corev1.PodList{}, client.MatchingLabels{"app": "pods"}) == 0
	})
	r.podsGone = time.Since(t3)
	if r.rss, err = cp.controller.peakRSS(); err != nil {
		b.Fatal(err)
	}
	return r
}

// usage is every component's CPU time and the apiserver's writes so far.
func (cp *controlPlane) usage(b *testing.B) (map[string]time.Duration, map[string]float64) {
	cpu, err := cp.componentCPU()
	if err != nil {
		b.Fatal(err)
	}
	writes, err := cp.writes(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	return cpu, writes
}

func cpuDiff(after, before map[string]time.Duration) map[string]time.Duration {
	out := map[string]time.Duration{}
	for k, v := range after {
		out[k] = v - before[k]
	}
	return out
}

func diff(after, before map[string]float64, n int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d / float64(n)
		}
	}
	return out
}

// parallel runs do(0…n-1), 16 at a time; the first error fails the benchmark.
func parallel(b *testing.B, n int, do func(i int) error) {
	var g errgroup.Group
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error { return do(i) })
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

func vmName(i int) string { return fmt.Sprintf("vm-%04d", i) }

// scaleVM is a small VM as users write them (64M guest, one containerDisk).
func scaleVM(ns string, i int) *virtv1.VirtualMachine {
	return &virtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vmName(i)},
		Spec: virtv1.VirtualMachineSpec{RunStrategy: ptr.To(virtv1.RunStrategyAlways), Template: &virtv1.VirtualMachineInstanceTemplateSpec{
			Spec: virtv1.VirtualMachineInstanceSpec{
				Domain: virtv1.DomainSpec{
					Resources: virtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64M"), corev1.ResourceCPU: resource.MustParse("10m")}},
					Devices:   virtv1.Devices{Disks: []virtv1.Disk{{Name: "root"}}},
				},
				Volumes: []virtv1.Volume{{Name: "root", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "example/disk:1"}}}},
			},
		}},
	}
}

// scaleReplicaSet is n plain Pods of the same size as the VMs' launcher Pods ask for the guest.
func scaleReplicaSet(ns string, n int) *appsv1.ReplicaSet {
	labels := map[string]string{"app": "pods"}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pods"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(n)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "c", Image: "example/app:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64M"), corev1.ResourceCPU: resource.MustParse("10m")}},
			}}}}},
	}
}

// watcher follows the benchmark's namespace through one cache: when each VMI was first Scheduled
// (or later), each VM first Running and Stopped, each Pod Running; how many VMIs and Pods exist.
// It also plays the node agents (agentSim): a Scheduled instance becomes Running with Ready=True,
// one status patch, as the agent writes it once the launcher reports the guest running.
type watcher struct {
	mu                                             sync.Mutex
	vmiScheduled, vmRunning, vmStopped, podRunning map[string]time.Time
	vmiSeen, launcherSeen, launcherRunning         map[string]time.Time
	conflicts                                      int
	c                                              client.Client
	cache                                          cache.Cache
	queue                                          chan *virtv1.VirtualMachineInstance
	wg                                             sync.WaitGroup
	errs                                           []error // the simulated agents' failed writes
}

func newWatcher(b *testing.B, ctx context.Context, cp *controlPlane, ns string) *watcher {
	w := &watcher{vmiScheduled: map[string]time.Time{}, vmRunning: map[string]time.Time{}, vmStopped: map[string]time.Time{},
		podRunning: map[string]time.Time{}, vmiSeen: map[string]time.Time{}, launcherSeen: map[string]time.Time{}, launcherRunning: map[string]time.Time{},
		c: cp.client, queue: make(chan *virtv1.VirtualMachineInstance, 10000)}
	c, err := cache.New(cp.cfg, cache.Options{Scheme: scheme.New(), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		b.Fatal(err)
	}
	w.cache = c
	for obj, on := range map[client.Object]func(any){&virtv1.VirtualMachineInstance{}: w.onVMI, &virtv1.VirtualMachine{}: w.onVM, &corev1.Pod{}: w.onPod} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: on, UpdateFunc: func(_, o any) { on(o) },
		}); err != nil {
			b.Fatal(err)
		}
	}
	w.wg.Go(func() { _ = c.Start(ctx) })
	for range 16 { // 100 agents' worth of workers would not be faster on 2 cores
		w.wg.Go(func() { w.agentSim(ctx) })
	}
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("cache did not sync")
	}
	return w
}

func (w *watcher) onVMI(o any) {
	vmi, ok := o.(*virtv1.VirtualMachineInstance)
	if !ok {
		return
	}
	w.mu.Lock()
	first(w.vmiSeen, vmi.Name)
	_, seen := w.vmiScheduled[vmi.Name]
	if !seen && (vmi.Status.Phase == virtv1.Scheduled || vmi.Status.Phase == virtv1.Running) {
		w.vmiScheduled[vmi.Name] = time.Now()
	}
	w.mu.Unlock()
	if !seen && vmi.Status.Phase == virtv1.Scheduled {
		w.queue <- vmi
	}
}

func (w *watcher) onVM(o any) {
	vm, ok := o.(*virtv1.VirtualMachine)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	target := map[virtv1.VirtualMachinePrintableStatus]map[string]time.Time{virtv1.VirtualMachineStatusRunning: w.vmRunning, virtv1.VirtualMachineStatusStopped: w.vmStopped}[vm.Status.PrintableStatus]
	if target == nil || (vm.Status.PrintableStatus == virtv1.VirtualMachineStatusStopped && vm.Spec.EffectiveRunStrategy() != virtv1.RunStrategyHalted) {
		return
	}
	if _, seen := target[vm.Name]; !seen {
		target[vm.Name] = time.Now()
	}
}

func (w *watcher) onPod(o any) {
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case pod.Labels["app"] == "pods" && pod.Status.Phase == corev1.PodRunning:
		first(w.podRunning, pod.Name)
	case pod.Labels["app"] != "pods":
		first(w.launcherSeen, pod.Name)
		if pod.Status.Phase == corev1.PodRunning {
			first(w.launcherRunning, pod.Name)
		}
	}
}

// stop waits for the cache and the simulated agents, once their context has ended.
func (w *watcher) stop() { w.wg.Wait() }

// first records now for name unless m has it.
func first(m map[string]time.Time, name string) {
	if _, seen := m[name]; !seen {
		m[name] = time.Now()
	}
}

// count is how many objects of list's kind the cache holds (Pods: the ReplicaSet's).
func (w *watcher) count(ctx context.Context, list client.ObjectList, opts ...client.ListOption) int {
	if err := w.cache.List(ctx, list, opts...); err != nil {
		return -1
	}
	return meta.LenList(list)
}

// agentSim patches each Scheduled instance to Running, as the node agent does (one merge patch
// under an optimistic lock, retried on conflict).
func (w *watcher) agentSim(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case vmi := <-w.queue:
			for {
				cur := vmi.DeepCopy()
				cur.Status.SetPhase(virtv1.Running, "", metav1.Now())
				meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: virtv1.VirtualMachineInstanceReady, Status: metav1.ConditionTrue, Reason: "GuestRunning"})
				err := w.c.Status().Patch(ctx, cur, client.MergeFromWithOptions(vmi, client.MergeFromWithOptimisticLock{}))
				if err == nil || ctx.Err() != nil {
					break
				}
				w.mu.Lock()
				if apierrors.IsConflict(err) {
					w.conflicts++
				} else {
					w.errs = append(w.errs, fmt.Errorf("simulated agent: %s: %w", vmi.Name, err))
				}
				w.mu.Unlock()
				fresh := &virtv1.VirtualMachineInstance{}
				if err := w.c.Get(ctx, client.ObjectKeyFromObject(vmi), fresh); err != nil {
					break
				}
				vmi = fresh
			}
		}
	}
}

func (w *watcher) snapshot(m map[string]time.Time) []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Collect(maps.Values(m))
}

// len is how many names m holds.
func (w *watcher) len(m map[string]time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(m)
}

// waitFor waits until cond holds, failing when a component exited or scaleTimeout passed.
func (w *watcher) waitFor(b *testing.B, cp *controlPlane, what string, cond func() bool) {
	deadline := time.Now().Add(scaleTimeout)
	for {
		if cond() {
			return
		}
		w.mu.Lock()
		errs := slices.Clone(w.errs)
		w.mu.Unlock()
		if len(errs) > 0 {
			b.Fatalf("%s: %v", what, errs[0])
		}
		for _, p := range cp.procs {
			if err := p.exited(); err != nil {
				b.Fatalf("%s: %v", what, err)
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: not within %s (VMIs Scheduled %d, VMs Running %d, Stopped %d, Pods Running %d; logs in %s)",
				what, scaleTimeout, w.len(w.vmiScheduled), w.len(w.vmRunning), w.len(w.vmStopped), w.len(w.podRunning), cp.dir)
		}
		select {
		case <-b.Context().Done():
			b.Fatal(b.Context().Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func sum(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

// breakdown lists m's entries, largest first.
func breakdown(m map[string]float64) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// perObjectMillis is CPU time per object, in milliseconds, by component.
func perObjectMillis(cpu map[string]time.Duration, n int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range cpu {
		out[k] = v.Seconds() * 1000 / float64(n)
	}
	return out
}

// busy is how much of the machine's cores the components used over elapsed, in percent.
func busy(cpu map[string]time.Duration, elapsed time.Duration) float64 {
	var total time.Duration
	for _, v := range cpu {
		total += v
	}
	return 100 * total.Seconds() / elapsed.Seconds() / float64(runtime.NumCPU())
}

func (r scaleRun) report() string {
	var t table
	t.add(fmt.Sprintf("%d VMs / %d Pods on %d kwok nodes (seconds)", r.n, r.n, r.nodes), "P50", "P95", "max", "all done")
	t.add("first VM create → VM Running (per VM)", f2(percentile(r.vmLatency, 50)), f2(percentile(r.vmLatency, 95)), f2(percentile(r.vmLatency, 100)), f2(r.vmsAll.Seconds()))
	t.add("ReplicaSet create → Pod Running (per Pod)", f2(percentile(r.podLatency, 50)), f2(percentile(r.podLatency, 95)), f2(percentile(r.podLatency, 100)), f2(r.podsAll.Seconds()))
	for i, what := range []string{"every VMI created", "every launcher Pod created", "every launcher Pod Running (kwok)"} {
		t.add("first VM create → "+what, "", "", "", f2(r.steps[i].Seconds()))
	}
	t.add("first VM create → every VMI Scheduled", "", "", "", f2(r.vmsScheduled.Seconds()))
	t.add("all VMs Halted → every VM Stopped, every VMI gone", "", "", "", f2(r.vmsStopped.Seconds()))
	t.add("ReplicaSet deleted → every Pod gone", "", "", "", f2(r.podsGone.Seconds()))
	var b strings.Builder
	b.WriteString(t.String())
	fmt.Fprintf(&b, "ratio VM:Pod time to all running %.2f (goal ≤ 1.5); P50 %.2f, P95 %.2f\n", r.vmsAll.Seconds()/r.podsAll.Seconds(),
		percentile(r.vmLatency, 50)/percentile(r.podLatency, 50), percentile(r.vmLatency, 95)/percentile(r.podLatency, 95))
	fmt.Fprintf(&b, "apiserver writes per VM to Running: %.2f (%s)\n", sum(r.vmWrites), breakdown(r.vmWrites))
	fmt.Fprintf(&b, "apiserver writes per Pod to Running: %.2f (%s)\n", sum(r.podWrites), breakdown(r.podWrites))
	vmCPU, podCPU := perObjectMillis(r.vmCPU, r.n), perObjectMillis(r.podCPU, r.n)
	fmt.Fprintf(&b, "CPU ms per VM to Running, every component: %.1f (%s); busy %.0f %% of %d cores\n", sum(vmCPU), breakdown(vmCPU),
		busy(r.vmCPU, r.vmsAll), runtime.NumCPU())
	fmt.Fprintf(&b, "CPU ms per Pod to Running, every component: %.1f (%s); busy %.0f %% of %d cores; kube-scheduler's client at %d QPS\n",
		sum(podCPU), breakdown(podCPU), busy(r.podCPU, r.podsAll), runtime.NumCPU(), r.schedulerQPS)
	fmt.Fprintf(&b, "virt-controller: %.2f CPU s to start %d VMs (%.1f ms per VM), %.2f CPU s to stop them; peak RSS %.1f MiB (goal ≤ 150 MiB); simulated agents' conflicts %d\n",
		r.cpuStart.Seconds(), r.n, r.cpuStart.Seconds()*1000/float64(r.n), r.cpuStop.Seconds(), mib(r.rss), r.simConflicts)
	return b.String()
}

// growthReport compares the sizes: per-VM cost that grows with N would show quadratic work.
func growthReport(runs []scaleRun) string {
	var t table
	t.add("VMs", "all Running (s)", "per VM (ms)", "CPU per VM start (ms)", "writes per VM", "peak RSS (MiB)", "VM:Pod all running")
	for _, r := range runs {
		t.add(strconv.Itoa(r.n), f2(r.vmsAll.Seconds()), fmt.Sprintf("%.1f", r.vmsAll.Seconds()*1000/float64(r.n)),
			fmt.Sprintf("%.1f", r.cpuStart.Seconds()*1000/float64(r.n)), fmt.Sprintf("%.2f", sum(r.vmWrites)), fmt.Sprintf("%.1f", mib(r.rss)),
			f2(r.vmsAll.Seconds()/r.podsAll.Seconds()))
	}
	return t.String()
}

func f2(x float64) string { return fmt.Sprintf("%.2f", x) }
