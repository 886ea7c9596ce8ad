package controllers_test

import (
	"context"
	"fmt"
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
	"github.com/podvirt/podvirt/controllers/podtemplate"
	"github.com/podvirt/podvirt/internal/testenv"
	"github.com/podvirt/podvirt/nodeagent"
	"github.com/podvirt/podvirt/nodeagent/accel"
)

const benchNode = "node-a"

// startCounted runs a manager on a REST config whose writes counter counts, until the benchmark ends.
func startCounted(b *testing.B, counter *writeCounter, cacheOpts cache.Options, clientOpts client.Options, add func(ctrl.Manager) error) {
	b.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = counter.wrap
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: env.Scheme, Cache: cacheOpts, Client: clientOpts,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	require.NoError(b, err)
	require.NoError(b, add(mgr))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	b.Cleanup(func() { cancel(); require.NoError(b, <-done) })
}

// BenchmarkControllerWritesPerVMStart counts every write to the apiserver of a whole VM start, from
// "VM set to start" until every VM shows Running and Ready: the shipped controllers and the shipped
// node agent (its launchers played by doubles whose guest runs at once) each through their own
// counted client, every write with its response code. The benchmark plays only the scheduler and
// kubelet (binding each launcher Pod and reporting it running and ready; not counted). It prints
// the figures and asserts nothing about them. Run: make bench-controllers.
func BenchmarkControllerWritesPerVMStart(b *testing.B) {
	e := testenv.Require(b, env)
	const vms = 20
	for range b.N {
		ns := e.Namespace(b)
		ctx := context.Background()
		ctrlWrites, agentWrites := newWriteCounter(), newWriteCounter()
		o := controllers.Options{
			Launcher:           podtemplate.Config{LauncherImage: "example/virt-launcher:bench", UseEmulation: true, Overhead: podtemplate.DefaultOverhead(), LauncherUID: launcherv1.LauncherUID},
			Namespace:          ns,
			HeartbeatThreshold: time.Minute,
		}
		cacheOpts := controllers.CacheOptions(o)
		cacheOpts.DefaultNamespaces = map[string]cache.Config{ns: {}}
		startCounted(b, ctrlWrites, cacheOpts, client.Options{}, func(mgr ctrl.Manager) error { return controllers.AddToManager(mgr, o) })
		launchers := &runningLaunchers{synced: map[string]bool{}}
		startCounted(b, agentWrites, nodeagent.CacheOptions(benchNode, ns), nodeagent.ClientOptions(), func(mgr ctrl.Manager) error {
			_, err := nodeagent.Setup(mgr, nodeagent.Config{
				NodeName: benchNode, PodName: "virt-handler-bench", Namespace: ns,
				Accel: accel.Decide(true, accel.Result{}), Dial: launchers.dial,
				PollInterval: 2 * time.Second, HeartbeatInterval: 10 * time.Second, // as shipped
			})
			return err
		})

		for i := range vms {
			require.NoError(b, e.Client.Create(ctx, newVM(ns, fmt.Sprintf("vm-%02d", i), virtv1.RunStrategyHalted)))
		}
		require.Eventually(b, vmsShow(ns, vms, virtv1.VirtualMachineStatusStopped, false), wait, 50*time.Millisecond)
		require.Eventually(b, func() bool { return ctrlWrites.quietFor(time.Second) }, wait, 100*time.Millisecond)
		ctrlWrites.reset()
		agentWrites.reset()

		start := time.Now()
		for i := range vms {
			vm, _ := get(b, &virtv1.VirtualMachine{}, ns, fmt.Sprintf("vm-%02d", i))
			patch := client.MergeFrom(vm.DeepCopy())
			vm.Spec.RunStrategy = ptr.To(virtv1.RunStrategyAlways)
			require.NoError(b, e.Client.Patch(ctx, vm, patch))
		}
		require.Eventually(b, func() bool {
			bindLauncherPods(b, ns)
			return vmsShow(ns, vms, virtv1.VirtualMachineStatusRunning, true)()
		}, 2*wait, 100*time.Millisecond)
		elapsed := time.Since(start)
		// Count trailing writes too: wait until neither component has written for 3 s (longer than
		// the agent's 2 s poll), then stop counting.
		require.Eventually(b, func() bool { return ctrlWrites.quietFor(3*time.Second) && agentWrites.quietFor(3*time.Second) },
			wait, 100*time.Millisecond)
		ctrlCounts, agentCounts := ctrlWrites.reset(), agentWrites.reset()

		b.Logf("writes to the apiserver from start to every VM Running and Ready, %d VMs, %s (verb, resource, response code, count):", vms, elapsed.Round(time.Millisecond))
		report(b.Logf, "controllers", ctrlCounts, vms)
		report(b.Logf, "node agent", agentCounts, vms)
		c, a := totals(ctrlCounts), totals(agentCounts)
		per := func(n int) float64 { return float64(n) / vms }
		b.Logf("per VM: controller state writes %.2f, node-agent state writes %.2f, together %.2f; events %.2f + %.2f; optimistic-lock conflicts (409) %.2f + %.2f; agent heartbeat lease writes %d (per node, not per VM)",
			per(c.state), per(a.state), per(c.state+a.state), per(c.events), per(a.events), per(c.conflicts), per(a.conflicts), a.leases)
		b.ReportMetric(per(c.state), "ctrl-writes/VM")
		b.ReportMetric(per(a.state), "agent-writes/VM")
		b.ReportMetric(per(c.events+a.events), "events/VM")
		b.ReportMetric(per(c.conflicts+a.conflicts), "conflicts/VM")
	}
}

// vmsShow reports whether all n VMs in ns show status (and, with ready, are Ready).
func vmsShow(ns string, n int, status virtv1.VirtualMachinePrintableStatus, ready bool) func() bool {
	return func() bool {
		var list virtv1.VirtualMachineList
		if env.Client.List(context.Background(), &list, client.InNamespace(ns)) != nil || len(list.Items) != n {
			return false
		}
		for _, vm := range list.Items {
			if vm.Status.PrintableStatus != status || (ready && !vm.Status.Ready) {
				return false
			}
		}
		return true
	}
}

// bindLauncherPods plays the scheduler and kubelet for every launcher Pod in ns not yet bound.
func bindLauncherPods(b *testing.B, ns string) {
	var vmis virtv1.VirtualMachineInstanceList
	require.NoError(b, env.Client.List(context.Background(), &vmis, client.InNamespace(ns)))
	for i := range vmis.Items {
		v := &vmis.Items[i]
		if pod, ok := get(b, &corev1.Pod{}, ns, podtemplate.PodName(v)); ok && pod.Spec.NodeName == "" {
			runPod(b, v, benchNode)
		}
	}
}
