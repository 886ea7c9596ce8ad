//go:build bench

package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/localcluster"
	"github.com/podvirt/podvirt/nodeagent/launcherclient"
	"github.com/podvirt/podvirt/tests/framework"
)

// BenchmarkConsole measures the serial console through the whole chain (kube-apiserver → virt-api →
// node agent → the guest's serial socket) on the cluster KUBECONFIG points at, and prints:
//   - round trip of one typed byte until the guest's echo arrives, BENCH_SAMPLES (default 200)
//     times, against the same through `kubectl exec` (client-go's remotecommand, as kubectl) of
//     `cat` in a Pod on the same node, and the ratio of their P50 and P95;
//   - throughput of guest output through the chain;
//   - virt-api's and the node agent's memory (cgroup working set) with 0 and 20 open consoles.
//
// Run it once: `make bench-console` (-benchtime 1x).
func BenchmarkConsole(b *testing.B) {
	n := envInt(b, "BENCH_SAMPLES", 200)
	out := os.Stdout
	f := framework.New(b)
	requireDeployed(f)
	ctx := f.Context()
	fmt.Fprintf(out, "environment before the run:\n%s\n", describeEnvironment(ctx, f))

	vmi := &virtv1.VirtualMachineInstance{Spec: seedSpec(b)}
	vmi.Name, vmi.Namespace = "console", f.Namespace
	f.Create(vmi)
	probe := f.ProbePod("cat", corev1.RestartPolicyNever, "sleep")
	f.Create(probe)
	f.WaitForPodRunningReady("cat", 2*time.Minute)
	f.Eventually("instance running", 3*time.Minute, func(ctx context.Context) (bool, error) {
		err := f.Client.Get(ctx, client.ObjectKeyFromObject(vmi), vmi)
		return err == nil && vmi.Status.Phase == virtv1.Running, err
	})

	f.Eventually("the guest's boot finished", 3*time.Minute, func(context.Context) (bool, error) {
		return strings.Contains(f.PodLogs(vmi.Status.LauncherPod, launcherv1.ConsoleLogContainer), userDataExited), nil
	})
	c := openConsole(b, f)
	c.typeUntil(b, "\n", "# ", 40) // the guest's shell is up
	consoleRTT, execRTT := roundTrips(b, c, startExecCat(b, f, "cat"), n)
	bytesOut, took := c.throughput(b, 2000)
	_ = c.ws.Close() // the last viewer leaves: the node agent lets go of the serial socket
	socketRTT := socketRoundTrips(b, f, vmi, n)
	fmt.Fprintf(out, "\nround trip of one byte, %d samples:\n%s\n", n, rttTable(consoleRTT, execRTT, socketRTT))
	fmt.Fprintf(out, "guest output through the chain: %d bytes in %s = %.3f MB/s (the guest's emulated UART under TCG is the limit, not the chain)\n",
		bytesOut, took.Round(time.Millisecond), float64(bytesOut)/took.Seconds()/1e6)
	fmt.Fprintf(out, "\nmemory (cgroup working set):\n%s\n", consoleMemory(b, f, 20))
}

// benchConsole is one console websocket with a reader delivering frames with their arrival time.
type benchConsole struct {
	ws     *websocket.Conn
	frames chan frame
	seen   bytes.Buffer
	ended  error // why the reader stopped, once frames is closed
}

type frame struct {
	data []byte
	at   time.Time
}

func openConsole(b *testing.B, f *framework.Framework) *benchConsole {
	b.Helper()
	ws, resp, err := f.DialSubresource(f.Config.Host, "/namespaces/"+f.Namespace+"/virtualmachineinstances/console/console")
	if err != nil {
		b.Fatalf("console: %v (%+v)", err, resp)
	}
	c := &benchConsole{ws: ws, frames: make(chan frame, 4096)}
	go func() {
		defer close(c.frames)
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				c.ended = err
				return
			}
			c.frames <- frame{data, time.Now()}
		}
	}()
	b.Cleanup(func() {
		_ = ws.Close()
		for range c.frames { // the reader ends with the connection
		}
	})
	return c
}

func (c *benchConsole) send(b *testing.B, s string) time.Time {
	b.Helper()
	at := time.Now()
	if err := c.ws.WriteMessage(websocket.BinaryMessage, []byte(s)); err != nil {
		b.Fatalf("type %q: %v", s, err)
	}
	return at
}

// waitFor reads frames until the output since the last call contains want; it returns when the
// frame that completed it arrived.
func (c *benchConsole) waitFor(b *testing.B, want string, timeout time.Duration) (time.Time, bool) {
	b.Helper()
	deadline := time.After(timeout)
	for {
		if i := strings.Index(c.seen.String(), want); i >= 0 {
			c.seen.Next(i + len(want))
			return time.Time{}, true
		}
		select {
		case fr, ok := <-c.frames:
			if !ok {
				b.Fatalf("the console closed (%v); it said %q", c.ended, tailOf(c.seen.String(), 300))
			}
			c.seen.Write(fr.data)
			if strings.Contains(c.seen.String(), want) {
				i := strings.Index(c.seen.String(), want)
				c.seen.Next(i + len(want))
				return fr.at, true
			}
		case <-deadline:
			return time.Time{}, false
		}
	}
}

func (c *benchConsole) typeUntil(b *testing.B, input, want string, attempts int) {
	b.Helper()
	for range attempts {
		c.send(b, input)
		if _, ok := c.waitFor(b, want, 5*time.Second); ok {
			return
		}
	}
	b.Fatalf("no %q on the console after typing %q %d times", want, input, attempts)
}

func tailOf(s string, n int) string { return s[max(0, len(s)-n):] }

// roundTrips types one byte at a time and times its echo; every 40 bytes the line is submitted
// (the shell answers "not found" and a prompt) so it stays short.
func (c *benchConsole) sample(b *testing.B, i int) time.Duration {
	b.Helper()
	sent := c.send(b, "x")
	at, ok := c.waitFor(b, "x", 10*time.Second)
	if !ok {
		b.Fatalf("console sample %d: no echo within 10 s", i+1)
	}
	if (i+1)%40 == 0 {
		c.typeUntil(b, "\n", "# ", 5)
	}
	return at.Sub(sent)
}

// roundTrips takes n samples of the console and of exec alternately, so that whatever else the
// machine does weighs on both alike.
func roundTrips(b *testing.B, c *benchConsole, e *execCat, n int) (console, exec []time.Duration) {
	b.Helper()
	for i := range n {
		console = append(console, c.sample(b, i))
		exec = append(exec, e.sample(b, i))
	}
	c.typeUntil(b, "\n", "# ", 5)
	return console, exec
}

// throughput has the guest print lines of 70 bytes and times them until the end marker arrives.
func (c *benchConsole) throughput(b *testing.B, lines int) (int, time.Duration) {
	b.Helper()
	c.seen.Reset()
	cmd := fmt.Sprintf("i=0; while [ $i -lt %d ]; do echo %s; i=$((i+1)); done; echo end-$((6*7))\n", lines, strings.Repeat("0123456789", 7))
	start := c.send(b, cmd)
	total := 0
	deadline := time.After(10 * time.Minute)
	for {
		select {
		case fr, ok := <-c.frames:
			if !ok {
				b.Fatalf("the console closed during the throughput run: %v", c.ended)
			}
			total += len(fr.data)
			c.seen.Write(fr.data)
			if strings.Contains(c.seen.String(), "end-42") {
				return total, fr.at.Sub(start)
			}
			if c.seen.Len() > 1<<10 { // keep only a tail to look for the marker in
				tail := append([]byte(nil), c.seen.Bytes()[c.seen.Len()-64:]...)
				c.seen.Reset()
				c.seen.Write(tail)
			}
		case <-deadline:
			b.Fatalf("the guest's output did not end within 10 minutes (%d bytes)", total)
		}
	}
}

// execCat is `cat` running in the probe Pod through the kube-apiserver's exec (client-go's
// remotecommand, as kubectl exec): one byte written to its stdin comes back on its stdout.
type execCat struct {
	stdin  *io.PipeWriter
	stdout *timedWriter
	done   chan error
}

func startExecCat(b *testing.B, f *framework.Framework, pod string) *execCat {
	b.Helper()
	req := f.Clientset.CoreV1().RESTClient().Post().Resource("pods").Namespace(f.Namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "probe", Command: []string{"/probe", "cat"}, Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	exec, err := remotecommand.NewWebSocketExecutor(f.Config, "GET", req.URL().String())
	if err != nil {
		b.Fatal(err)
	}
	stdinR, stdinW := io.Pipe()
	e := &execCat{stdin: stdinW, stdout: &timedWriter{frames: make(chan frame, 1024)}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(f.Context())
	go func() {
		e.done <- exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdinR, Stdout: e.stdout, Stderr: io.Discard})
	}()
	b.Cleanup(func() { _ = stdinW.Close(); cancel(); <-e.done })
	return e
}

func (e *execCat) sample(b *testing.B, i int) time.Duration {
	b.Helper()
	sent := time.Now()
	if _, err := e.stdin.Write([]byte("x")); err != nil {
		b.Fatalf("exec sample %d: %v", i+1, err)
	}
	select {
	case fr := <-e.stdout.frames:
		return fr.at.Sub(sent)
	case err := <-e.done:
		b.Fatalf("exec ended: %v", err)
	case <-time.After(10 * time.Second):
		b.Fatalf("exec sample %d: no echo within 10 s", i+1)
	}
	return 0
}

// timedWriter hands each write to frames with its time.
type timedWriter struct{ frames chan frame }

func (w *timedWriter) Write(p []byte) (int, error) {
	w.frames <- frame{append([]byte(nil), p...), time.Now()}
	return len(p), nil
}

func rttTable(console, exec, socket []time.Duration) string {
	cs, es := durations("console through virt-api", console), durations("kubectl exec cat", exec)
	ss := durations("the guest's serial socket itself", socket)
	t := &table{}
	t.add("path", "n", "P50 s", "P95 s", "min s", "max s")
	t.add(distRow(cs, "%.4f")...)
	t.add(distRow(es, "%.4f")...)
	t.add(distRow(ss, "%.4f")...)
	t.add("ratio console/exec", "", ratio(cs, es, 50), ratio(cs, es, 95), "", "")
	return t.String() + "goal: P50 and P95 ratios ≤ 1.2\n"
}

// socketRoundTrips times the guest's echo at its serial socket, from the node (as the node agent
// reaches it): what the guest and qemu take, without the chain in front.
func socketRoundTrips(b *testing.B, f *framework.Framework, vmi *virtv1.VirtualMachineInstance, n int) []time.Duration {
	b.Helper()
	pod := &corev1.Pod{}
	if err := f.Client.Get(f.Context(), client.ObjectKey{Namespace: vmi.Namespace, Name: vmi.Status.LauncherPod}, pod); err != nil {
		b.Fatal(err)
	}
	dir := launcherv1.HostPrivateDir(localcluster.DefaultConfig().KubeletRootDir, string(pod.UID))
	var conn net.Conn
	f.Eventually("the serial socket free", time.Minute, func(ctx context.Context) (bool, error) {
		c, err := launcherclient.DialSocket(ctx, dir, launcherv1.SerialSocket)
		conn = c
		return err == nil, err
	})
	defer conn.Close()
	buf := make([]byte, 4096)
	echo := func() (time.Duration, error) {
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		sent := time.Now()
		if _, err := conn.Write([]byte("x")); err != nil {
			return 0, err
		}
		for {
			k, err := conn.Read(buf)
			if err != nil {
				return 0, err
			}
			if bytes.IndexByte(buf[:k], 'x') >= 0 {
				return time.Since(sent), nil
			}
		}
	}
	out := make([]time.Duration, 0, n)
	for i := range n {
		d, err := echo()
		if err != nil {
			b.Fatalf("serial socket sample %d: %v", i+1, err)
		}
		out = append(out, d)
		if (i+1)%40 == 0 {
			_, _ = conn.Write([]byte("\n"))
		}
	}
	return out
}

// consoleMemory reads virt-api's and the node agent's working set, opens n consoles (each reading),
// has the guest print to all of them, and reads it again.
func consoleMemory(b *testing.B, f *framework.Framework, n int) string {
	b.Helper()
	before := componentMemory(b, f)
	consoles := make([]*benchConsole, n)
	for i := range consoles {
		consoles[i] = openConsole(b, f)
	}
	consoles[0].typeUntil(b, "echo all-$((20+22))\n", "all-42", 5)
	for i, c := range consoles[1:] {
		if _, ok := c.waitFor(b, "all-42", 30*time.Second); !ok {
			b.Fatalf("console %d did not see the output", i+2)
		}
	}
	after := componentMemory(b, f)
	t := &table{}
	t.add("component", "0 consoles MiB", fmt.Sprintf("%d consoles MiB", n))
	for _, name := range []string{"virt-api", "virt-handler"} {
		t.add(name, fmt.Sprintf("%.1f", mib(before[name])), fmt.Sprintf("%.1f", mib(after[name])))
	}
	for _, c := range consoles {
		_ = c.ws.Close()
	}
	return t.String()
}

// componentMemory is the working set of the virt-api and virt-handler Pods (one of each here).
func componentMemory(b *testing.B, f *framework.Framework) map[string]int64 {
	b.Helper()
	out := map[string]int64{}
	for _, name := range []string{"virt-api", "virt-handler"} {
		pods := &corev1.PodList{}
		if err := f.Client.List(f.Context(), pods, client.InNamespace("podvirt"), client.MatchingLabels{"app.kubernetes.io/name": name}); err != nil || len(pods.Items) != 1 {
			b.Fatalf("%s Pods: %v (%d, want 1)", name, err, len(pods.Items))
		}
		dir, err := podMemoryCgroup(string(pods.Items[0].UID))
		if err != nil {
			b.Fatal(err)
		}
		ws, err := cgroupWorkingSet(dir)
		if err != nil {
			b.Fatal(err)
		}
		out[name] = ws
	}
	return out
}
