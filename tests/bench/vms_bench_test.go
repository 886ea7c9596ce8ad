//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/testenv"
	"github.com/podvirt/podvirt/tests/framework"
)

// BenchmarkNodeSide runs, in one go on the cluster KUBECONFIG points at: BENCH_SAMPLES (default
// 20) plain Pods and instances of the seed's vm-cirros alternately, one at a time (each deleted
// and gone before the next), then BENCH_SAMPLES of each created at once (BENCH_BURST=0 skips
// that), and prints the figures. Run it once: `make bench-vms` (-benchtime 1x).
func BenchmarkNodeSide(b *testing.B) {
	n := envInt(b, "BENCH_SAMPLES", 20)
	burstN := envInt(b, "BENCH_BURST", n)
	out := os.Stdout // the benchmark's log is cut after 10 lines: the figures go to stdout
	f := framework.New(b)
	requireDeployed(f)
	r := &runner{f: f, rec: newPhaseRecorder(), seed: seedSpec(b), node: f.HostNode()}
	stop := r.watch(f.Context())
	defer stop()
	ctx := f.Context()
	fmt.Fprintf(out, "environment before the run:\n%s\n", describeEnvironment(ctx, f))

	// A first Pod and instance, not counted: the first launcher after a deploy pays one-off costs
	// (images into the page cache, the controllers' caches filling).
	p, v, err := r.measurePair(ctx, "warmup")
	if err != nil {
		b.Fatalf("warm-up: %v", err)
	}
	fmt.Fprintf(out, "warm-up (not counted): %s\n", pairLine(p, v))
	var res results
	for i := range n {
		p, v, err := r.measurePair(ctx, fmt.Sprintf("seq-%02d", i+1))
		if err != nil {
			b.Fatalf("sample %d: %v", i+1, err)
		}
		res.pods, res.vmis = append(res.pods, p), append(res.vmis, v)
		fmt.Fprintf(out, "%2d: %s\n", i+1, pairLine(p, v))
	}
	if burstN > 0 {
		if res.burstPods, err = r.burstPods(ctx, burstN); err != nil {
			b.Fatalf("%d pods at once: %v", burstN, err)
		}
		fmt.Fprintf(out, "%d pods at once: done in %.2f s\n", burstN, seconds(res.burstPods.makespan))
		if res.burstVMIs, err = r.burstVMIs(ctx, burstN); err != nil {
			b.Fatalf("%d instances at once: %v", burstN, err)
		}
		fmt.Fprintf(out, "%d instances at once: done in %.2f s\n", burstN, seconds(res.burstVMIs.makespan))
	}
	fmt.Fprintf(out, "environment after the run:\n%s\n\n%s", describeEnvironment(ctx, f), res.report())
	res.reportMetrics(b)
}

// measurePair measures a plain Pod and then an instance, named after name.
func (r *runner) measurePair(ctx context.Context, name string) (podRun, vmiRun, error) {
	p, err := r.measurePod(ctx, name+"-pod")
	if err != nil {
		return p, vmiRun{}, err
	}
	v, err := r.measureVMI(ctx, name+"-vmi")
	return p, v, err
}

func pairLine(p podRun, v vmiRun) string {
	return fmt.Sprintf("pod %.2fs | vmi %.2fs (launcher pod %.2fs), banner %.2fs, working set %.1f MiB, gone after %.2fs",
		seconds(p.run), seconds(v.run), seconds(v.podStart), seconds(v.bannerLogged), mib(v.mem.workingSet()), seconds(v.gone))
}

// watch records the namespace's instances and Pods until the returned stop is called.
func (r *runner) watch(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for kind, gvr := range map[string]schema.GroupVersionResource{
		"vmi": virtv1.GroupVersion.WithResource("virtualmachineinstances"),
		"pod": corev1.SchemeGroupVersion.WithResource("pods"),
	} {
		wg.Go(func() {
			if err := r.rec.run(ctx, r.f.Dynamic.Resource(gvr).Namespace(r.f.Namespace), kind); err != nil {
				r.rec.fail(err)
			}
		})
	}
	return func() { cancel(); wg.Wait() }
}

// seedSpec is the instance spec of examples/vm-cirros.yaml (the seed's VM).
func seedSpec(b *testing.B) virtv1.VirtualMachineInstanceSpec {
	raw, err := os.ReadFile(testenv.RepoPath("examples", "vm-cirros.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	var vm virtv1.VirtualMachine
	if err := yaml.UnmarshalStrict(raw, &vm); err != nil {
		b.Fatalf("examples/vm-cirros.yaml: %v", err)
	}
	if vm.Spec.Template == nil {
		b.Fatal("examples/vm-cirros.yaml: no spec.template")
	}
	return vm.Spec.Template.Spec
}

// requireDeployed fails early, and clearly, when Podvirt is not running on the cluster.
func requireDeployed(f *framework.Framework) {
	f.T().Helper()
	f.Eventually("virt-controller and virt-handler ready (deploy with `make deploy`)", 2*time.Minute, func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "podvirt", Name: "virt-controller"}, d); err != nil {
			return false, err
		}
		ds := &appsv1.DaemonSet{}
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "podvirt", Name: "virt-handler"}, ds); err != nil {
			return false, err
		}
		return d.Status.AvailableReplicas > 0 && ds.Status.NumberReady > 0,
			fmt.Errorf("virt-controller available %d, virt-handler ready %d", d.Status.AvailableReplicas, ds.Status.NumberReady)
	})
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		b.Fatalf("%s=%q: want a whole number ≥ 0", name, v)
	}
	return n
}
