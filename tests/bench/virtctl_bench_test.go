//go:build bench

package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// BenchmarkVirtctl measures, with the built binaries ($PODVIRT_VIRTCTL, $PODVIRT_KUBECTL; make
// bench-virtctl sets them), BENCH_SAMPLES (default 5) times each, alternately: the wall time of
// `virtctl start VM --wait` against `kubectl apply` + `kubectl wait --for=condition=Ready` of a plain
// Pod, and the time from starting `virtctl console` on a running VM (typing Enter at once) to its
// first byte of output; and prints virtctl's size.
func BenchmarkVirtctl(b *testing.B) {
	n := envInt(b, "BENCH_SAMPLES", 5)
	virtctl, kubectl := os.Getenv("PODVIRT_VIRTCTL"), os.Getenv("PODVIRT_KUBECTL")
	if virtctl == "" || kubectl == "" {
		b.Fatal("PODVIRT_VIRTCTL and PODVIRT_KUBECTL must name the binaries (make bench-virtctl sets them)")
	}
	out := os.Stdout
	f := framework.New(b)
	requireDeployed(f)
	ctx := f.Context()
	fmt.Fprintf(out, "environment before the run:\n%s\n", describeEnvironment(ctx, f))
	run := func(args ...string) time.Duration {
		start := time.Now()
		cmd := exec.CommandContext(ctx, args[0], append([]string{"--kubeconfig", framework.Kubeconfig(), "-n", f.Namespace}, args[1:]...)...)
		if msg, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %v\n%s", args, err, msg)
		}
		return time.Since(start)
	}

	vm := &virtv1.VirtualMachine{Spec: virtv1.VirtualMachineSpec{RunStrategy: ptrTo(virtv1.RunStrategyHalted),
		Template: &virtv1.VirtualMachineInstanceTemplateSpec{Spec: seedSpec(b)}}}
	vm.Name, vm.Namespace = "vm", f.Namespace
	f.Create(vm)
	podFile := filepath.Join(b.TempDir(), "pod.yaml")
	pod := f.ProbePod("pod", corev1.RestartPolicyNever, "sleep")
	pod.APIVersion, pod.Kind = "v1", "Pod"
	raw, err := yaml.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(podFile, raw, 0o600); err != nil {
		b.Fatal(err)
	}
	var starts, pods []time.Duration
	for i := range n {
		starts = append(starts, run(virtctl, "start", "vm", "--wait"))
		run(virtctl, "stop", "vm", "--force", "--grace-period=0", "--wait")
		pods = append(pods, run(kubectl, "apply", "-f", podFile)+run(kubectl, "wait", "--for=condition=Ready", "pod/pod", "--timeout=2m"))
		run(kubectl, "delete", "pod", "pod", "--grace-period=0", "--wait")
		fmt.Fprintf(out, "%d: virtctl start --wait %.2f s, kubectl apply + wait (Pod) %.2f s\n", i+1, starts[i].Seconds(), pods[i].Seconds())
	}
	ss, ps := durations("virtctl start --wait (VM)", starts), durations("kubectl apply + wait (Pod)", pods)
	t := &table{}
	t.add("what", "n", "P50 s", "P95 s", "min s", "max s")
	t.add(distRow(ss, "%.2f")...)
	t.add(distRow(ps, "%.2f")...)
	t.add("ratio VM/Pod", "", ratio(ss, ps, 50), ratio(ss, ps, 95), "", "")
	fmt.Fprintf(out, "\n%s\n", t.String())

	run(virtctl, "start", "vm", "--wait")
	vmi := &virtv1.VirtualMachineInstance{}
	f.Eventually("the guest's boot finished", 3*time.Minute, func(ctx context.Context) (bool, error) {
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: "vm"}, vmi); err != nil {
			return false, err
		}
		return strings.Contains(f.PodLogs(vmi.Status.LauncherPod, launcherv1.ConsoleLogContainer), userDataExited), nil
	})
	var firstBytes []time.Duration
	for range n {
		firstBytes = append(firstBytes, firstConsoleByte(b, ctx, virtctl, f.Namespace))
	}
	t = &table{}
	t.add("what", "n", "P50 s", "P95 s", "min s", "max s")
	t.add(distRow(durations("virtctl console: start to first byte", firstBytes), "%.3f")...)
	fmt.Fprintf(out, "%s\n", t.String())
	if st, err := os.Stat(virtctl); err == nil {
		fmt.Fprintf(out, "virtctl binary: %.1f MiB (static, stripped)\n", mib(st.Size()))
	}
}

// firstConsoleByte starts `virtctl console vm`, types Enter at once, and times the first byte it prints.
func firstConsoleByte(b *testing.B, ctx context.Context, virtctl, ns string) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, virtctl, "--kubeconfig", framework.Kubeconfig(), "-n", ns, "console", "vm")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = stdin.Close(); cancel(); _ = cmd.Wait() }()
	if _, err := io.WriteString(stdin, "\n"); err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadFull(stdout, make([]byte, 1)); err != nil {
		b.Fatalf("virtctl console printed nothing: %v", err)
	}
	return time.Since(start)
}

func ptrTo[T any](v T) *T { return &v }
