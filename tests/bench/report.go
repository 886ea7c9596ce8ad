//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// results is everything one run measured.
type results struct {
	pods                 []podRun
	vmis                 []vmiRun
	burstPods, burstVMIs burst
}

func (res results) vmiSeries(name string, d func(vmiRun) time.Duration) series {
	s := series{name: name}
	for _, v := range res.vmis {
		s.xs = append(s.xs, seconds(d(v)))
	}
	return s
}

func (res results) podSeries(name string, d func(podRun) time.Duration) series {
	s := series{name: name}
	for _, p := range res.pods {
		s.xs = append(s.xs, seconds(d(p)))
	}
	return s
}

func (res results) memSeries(name string, v func(memorySample) int64) series {
	s := series{name: name}
	for _, r := range res.vmis {
		s.xs = append(s.xs, mib(v(r.mem)))
	}
	return s
}

func durations(name string, ds []time.Duration) series {
	s := series{name: name}
	for _, d := range ds {
		s.xs = append(s.xs, seconds(d))
	}
	return s
}

// report is the printed result: start latencies, console, memory.
func (res results) report() string {
	var b strings.Builder
	vmiStart := res.vmiSeries("VMI create → Running", func(v vmiRun) time.Duration { return v.run })
	podStart := res.podSeries("Pod create → Running", func(p podRun) time.Duration { return p.run })
	t := &table{}
	t.add("one at a time, alternating Pod/VMI (seconds, watch events)", "n", "P50", "P95", "min", "max")
	for _, s := range []series{
		vmiStart, podStart,
		res.vmiSeries("  VMI create → Scheduling (launcher Pod created)", func(v vmiRun) time.Duration { return v.scheduling }),
		res.vmiSeries("  VMI create → Scheduled (launcher Pod running)", func(v vmiRun) time.Duration { return v.scheduled }),
		res.vmiSeries("  launcher Pod appears → Running", func(v vmiRun) time.Duration { return v.podStart }),
		res.vmiSeries("VMI create → Running (apiserver timestamps, 1 s steps)", func(v vmiRun) time.Duration { return v.apiRun }),
		res.podSeries("Pod create → Running (apiserver timestamps, 1 s steps)", func(p podRun) time.Duration { return p.apiRun }),
		res.vmiSeries("VMI create → first console byte (runtime log time)", func(v vmiRun) time.Duration { return v.firstLogged }),
		res.vmiSeries("VMI create → first console byte (arrived on stream)", func(v vmiRun) time.Duration { return v.firstArrived }),
		res.vmiSeries("VMI create → guest banner (runtime log time)", func(v vmiRun) time.Duration { return v.bannerLogged }),
		res.vmiSeries("VMI create → guest banner (arrived on stream)", func(v vmiRun) time.Duration { return v.bannerArrived }),
		res.vmiSeries("VMI delete → launcher Pod gone", func(v vmiRun) time.Duration { return v.gone }),
		res.podSeries("Pod delete → gone", func(p podRun) time.Duration { return p.gone }),
	} {
		t.add(distRow(s, "%.2f")...)
	}
	b.WriteString(t.String())
	fmt.Fprintf(&b, "ratio VMI/Pod create → Running: P50 %s, P95 %s (goal ≤ 2.0 at P50, ≤ 2.5 at P95)\n\n", ratio(vmiStart, podStart, 50), ratio(vmiStart, podStart, 95))

	if len(res.burstVMIs.runs) > 0 {
		bv := durations("VMI create → Running", res.burstVMIs.runs)
		bp := durations("Pod create → Running", res.burstPods.runs)
		t := &table{}
		t.add(fmt.Sprintf("%d created at once, CPU request %s (seconds)", len(bv.xs), burstCPU), "n", "P50", "P95", "min", "max")
		t.add(distRow(bv, "%.2f")...)
		t.add(distRow(bp, "%.2f")...)
		b.WriteString(t.String())
		fmt.Fprintf(&b, "ratio VMI/Pod: P50 %s, P95 %s (goal ≤ 3); first create → last Running: VMIs %.2f s, Pods %.2f s\n\n",
			ratio(bv, bp, 50), ratio(bv, bp, 95), seconds(res.burstVMIs.makespan), seconds(res.burstPods.makespan))
	}
	b.WriteString(res.memoryReport())
	return b.String()
}

// memoryReport is the launcher Pods' memory once each guest ran its user data.
func (res results) memoryReport() string {
	t := &table{}
	t.add("launcher Pod memory after boot (MiB)", "n", "P50", "P95", "min", "max")
	for _, s := range []series{
		res.memSeries("cgroup memory.usage_in_bytes", func(m memorySample) int64 { return m.usage }),
		res.memSeries("cgroup working set (usage − total_inactive_file)", memorySample.workingSet),
		res.memSeries("cgroup total_rss (anonymous)", func(m memorySample) int64 { return m.rss }),
		res.memSeries("cgroup total_cache (page cache)", func(m memorySample) int64 { return m.cache }),
		res.memSeries("  of which total_mapped_file", func(m memorySample) int64 { return m.mappedFile }),
		res.memSeries("guest RAM allotted (qemu -m)", func(m memorySample) int64 { return m.guestAllotted }),
		res.memSeries("guest RAM touched (anon pages of the RAM mapping)", func(m memorySample) int64 { return m.guestTouched }),
		res.memSeries("TCG translation cache (qemu's rwx anon pages)", func(m memorySample) int64 { return m.tcg }),
		res.memSeries("qemu's other anonymous memory", func(m memorySample) int64 { return m.qemuOther }),
		res.memSeries("qemu's mapped file pages", func(m memorySample) int64 { return m.qemuFile }),
		res.memSeries("other processes' anonymous (launcher, init, console-log, pause)", func(m memorySample) int64 { return m.restAnon }),
		res.memSeries("resident file pages mapped in the Pod, each file once", func(m memorySample) int64 { return m.filesOnce }),
		res.memSeries("A. working set − guest allotted", func(m memorySample) int64 { return m.workingSet() - m.guestAllotted }),
		res.memSeries("B. working set − guest allotted − TCG cache", func(m memorySample) int64 { return m.workingSet() - m.guestAllotted - m.tcg }),
		res.memSeries("C. working set − guest touched − TCG cache (fixed overhead)", memorySample.fixedOverhead),
		res.memSeries("D. total_rss − guest touched − TCG cache (anonymous only)", func(m memorySample) int64 { return m.rss - m.guestTouched - m.tcg }),
		res.memSeries("E. C + mapped files charged elsewhere (the node's only VM)", memorySample.soleOverhead),
	} {
		t.add(distRow(s, "%.1f")...)
	}
	return t.String() + "goal: fixed overhead ≤ 80 MiB beyond what emulation costs (KubeVirt budgets 240 MiB)\n"
}

func ratio(a, b series, p float64) string {
	if len(a.xs) == 0 || len(b.xs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", percentile(a.xs, p)/percentile(b.xs, p))
}

// reportMetrics puts the headline figures on the benchmark's result line.
func (res results) reportMetrics(b *testing.B) {
	if len(res.vmis) == 0 {
		return
	}
	v := res.vmiSeries("", func(v vmiRun) time.Duration { return v.run })
	p := res.podSeries("", func(p podRun) time.Duration { return p.run })
	b.ReportMetric(percentile(v.xs, 50), "vmi-running-p50-s")
	b.ReportMetric(percentile(p.xs, 50), "pod-running-p50-s")
	b.ReportMetric(percentile(v.xs, 50)/percentile(p.xs, 50), "vmi/pod-p50")
	b.ReportMetric(percentile(res.vmiSeries("", func(v vmiRun) time.Duration { return v.bannerLogged }).xs, 50), "banner-p50-s")
	b.ReportMetric(percentile(res.memSeries("", memorySample.fixedOverhead).xs, 50), "overhead-p50-MiB")
}

// describeEnvironment says what the figures were measured on: the machine, and what else ran.
func describeEnvironment(ctx context.Context, f *framework.Framework) string {
	var b strings.Builder
	fmt.Fprintf(&b, "date %s; cpu %q × %d; memory %s; %s; kernel %s; cgroup %s; load %s\n",
		time.Now().Format(time.RFC3339), cpuModel(), runtime.NumCPU(), memTotal(), osName(),
		firstLine("/proc/sys/kernel/osrelease"), cgroupVersion(), firstLine("/proc/loadavg"))
	var pods corev1.PodList
	var vmis virtv1.VirtualMachineInstanceList
	if err := f.Client.List(ctx, &pods); err != nil {
		fmt.Fprintf(&b, "list pods: %v\n", err)
	}
	if err := f.Client.List(ctx, &vmis); err != nil {
		fmt.Fprintf(&b, "list instances: %v\n", err)
	}
	var others []string
	for _, p := range pods.Items {
		if p.Namespace != f.Namespace && p.Status.Phase == corev1.PodRunning {
			others = append(others, p.Namespace+"/"+p.Name)
		}
	}
	fmt.Fprintf(&b, "other running Pods on the cluster (%d): %s; instances in all namespaces: %d",
		len(others), strings.Join(others, " "), len(vmis.Items))
	return b.String()
}

func cpuModel() string {
	data, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func memTotal() string {
	data, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "MemTotal:") {
			var kb int64
			fmt.Sscanf(strings.TrimPrefix(line, "MemTotal:"), "%d", &kb)
			return fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
		}
	}
	return "unknown"
}

func osName() string {
	data, _ := os.ReadFile("/etc/os-release")
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "unknown OS"
}

func cgroupVersion() string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return "v2"
	}
	return "v1"
}

func firstLine(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "?"
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return line
}
