package controllers_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/controllers"
	"github.com/podvirt/podvirt/controllers/vmi"
	"github.com/podvirt/podvirt/internal/testenv"
)

// writeCounter counts the controllers' write requests by verb and resource path.
type writeCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet {
			w.mu.Lock()
			w.counts[req.Method+" "+resourceOf(req.URL.Path)]++
			w.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

func (w *writeCounter) reset() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.counts
	w.counts = map[string]int{}
	return c
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// resourceOf reduces /apis/g/v/namespaces/ns/res/name/sub to res/sub.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, p := range parts {
		if p == "namespaces" && i+2 < len(parts) {
			rest := parts[i+2:]
			if len(rest) >= 3 {
				return rest[0] + "/" + rest[2]
			}
			return rest[0]
		}
	}
	return path
}

// BenchmarkControllerWritesPerVMStart counts every write the controllers make to the apiserver from
// "VM set to start" to "launcher Pod running", per VM, for 20 VMs. It prints the figures; it
// asserts nothing about them. Run: make bench-controllers.
func BenchmarkControllerWritesPerVMStart(b *testing.B) {
	e := testenv.Require(b, env)
	const vms = 20
	for range b.N {
		ns := e.Namespace(b)
		counter := &writeCounter{counts: map[string]int{}}
		cfg := rest.CopyConfig(e.Config)
		cfg.WrapTransport = counter.wrap
		o := controllers.Options{
			Launcher:           vmi.Config{LauncherImage: "example/virt-launcher:bench", UseEmulation: true, Overhead: vmi.DefaultOverhead(), LauncherUID: launcherv1.LauncherUID},
			Namespace:          ns,
			HeartbeatThreshold: time.Minute,
		}
		cacheOpts := controllers.CacheOptions(o)
		cacheOpts.DefaultNamespaces = map[string]cache.Config{ns: {}}
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: e.Scheme, Cache: cacheOpts, Metrics: metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0", Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
		require.NoError(b, err)
		require.NoError(b, controllers.AddToManager(mgr, o))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- mgr.Start(ctx) }()

		for i := range vms {
			require.NoError(b, e.Client.Create(ctx, newVM(ns, fmt.Sprintf("vm-%02d", i), virtv1.RunStrategyHalted)))
		}
		settled := func(want virtv1.VirtualMachinePrintableStatus) func() bool {
			return func() bool {
				var list virtv1.VirtualMachineList
				if e.Client.List(ctx, &list, client.InNamespace(ns)) != nil || len(list.Items) != vms {
					return false
				}
				for _, vm := range list.Items {
					if vm.Status.PrintableStatus != want {
						return false
					}
				}
				return true
			}
		}
		require.Eventually(b, settled(virtv1.VirtualMachineStatusStopped), wait, 50*time.Millisecond)
		counter.reset()

		start := time.Now()
		for i := range vms {
			vm, _ := get(b, &virtv1.VirtualMachine{}, ns, fmt.Sprintf("vm-%02d", i))
			patch := client.MergeFrom(vm.DeepCopy())
			vm.Spec.RunStrategy = ptr.To(virtv1.RunStrategyAlways)
			require.NoError(b, e.Client.Patch(ctx, vm, patch))
		}
		// Play the scheduler and kubelet for every launcher Pod, then wait for every VMI to be Scheduled.
		require.Eventually(b, func() bool {
			var vmis virtv1.VirtualMachineInstanceList
			require.NoError(b, e.Client.List(ctx, &vmis, client.InNamespace(ns)))
			scheduled := 0
			for i := range vmis.Items {
				v := &vmis.Items[i]
				if v.Status.Phase == virtv1.Scheduled {
					scheduled++
					continue
				}
				pod, ok := get(b, &corev1.Pod{}, ns, vmi.PodName(v))
				if ok && pod.Spec.NodeName == "" {
					runPod(b, v, "node-a")
				}
			}
			return scheduled == vms
		}, wait, 100*time.Millisecond)
		require.Eventually(b, settled(virtv1.VirtualMachineStatusStarting), wait, 50*time.Millisecond)
		elapsed := time.Since(start)
		// Let any trailing reconcile finish before counting.
		time.Sleep(time.Second) //nolint:forbidigo // a benchmark quiescence window, not a test wait
		counts := counter.reset()
		cancel()
		require.NoError(b, <-done)

		total, events := 0, 0
		keys := make([]string, 0, len(counts))
		for k, n := range counts {
			keys = append(keys, k)
			if strings.HasSuffix(k, "events") {
				events += n
			} else {
				total += n
			}
		}
		sort.Strings(keys)
		b.Logf("writes by the controllers from start to launcher Pod running, %d VMs, %s:", vms, elapsed.Round(time.Millisecond))
		for _, k := range keys {
			b.Logf("  %-50s %4d  (%.2f per VM)", k, counts[k], float64(counts[k])/vms)
		}
		b.ReportMetric(float64(total)/vms, "writes/VM")
		b.ReportMetric(float64(events)/vms, "events/VM")
	}
}
