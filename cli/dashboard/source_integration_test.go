package dashboard

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/testenv"
)

var env *testenv.Env

// TestMain runs the Source's tests against a real apiserver (skipped under -short).
func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

const wait = 30 * time.Second

// recorder keeps what the Source sends.
type recorder struct {
	mu   sync.Mutex
	msgs []tea.Msg
}

func (r *recorder) send(m tea.Msg) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, m)
}

// String lists the messages' types (and the connection's errors).
func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, m := range r.msgs {
		if c, ok := m.(ConnMsg); ok {
			fmt.Fprintf(&b, "ConnMsg(%v) ", c.Err)
		} else {
			fmt.Fprintf(&b, "%T ", m)
		}
	}
	return b.String()
}

func (r *recorder) at(i int) tea.Msg {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msgs[i]
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

// waitFor waits until a message sent after the first from satisfies ok, and returns its index.
func (r *recorder) waitFor(t testing.TB, what string, from int, ok func(tea.Msg) bool) int {
	t.Helper()
	found := -1
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for i := from; i < len(r.msgs); i++ {
			if ok(r.msgs[i]) {
				found = i
				return true
			}
		}
		return false
	}, wait, 10*time.Millisecond, "waiting for %s; got %v", what, r)
	return found
}

// proxy is a TCP proxy to the apiserver that the test takes down (closing every connection and
// refusing new ones) and brings back on the same address: an apiserver outage, as a client sees it.
type proxy struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
	wg           sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	p := &proxy{addr: "127.0.0.1:0", target: target, conns: map[net.Conn]bool{}}
	p.up(t)
	p.addr = p.ln.Addr().String()
	t.Cleanup(p.down)
	return p
}

func (p *proxy) up(t *testing.T) {
	ln, err := net.Listen("tcp", p.addr)
	require.NoError(t, err)
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.pipe(c) }()
		}
	}()
}

func (p *proxy) pipe(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	_, _ = c.Close(), up.Close()
	<-done
}

// down closes the listener and every connection and waits for the proxy's goroutines.
func (p *proxy) down() {
	p.mu.Lock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]bool{}
	p.mu.Unlock()
	p.wg.Wait()
}

func watchClient(t testing.TB, cfg *rest.Config) client.WithWatch {
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: testenv.Scheme()})
	require.NoError(t, err)
	return c
}

func testVM(ns, name string) *virtv1.VirtualMachine {
	return &virtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: virtv1.VirtualMachineSpec{RunStrategy: ptr.To(virtv1.RunStrategyHalted), Template: &virtv1.VirtualMachineInstanceTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
			Spec: virtv1.VirtualMachineInstanceSpec{Domain: virtv1.DomainSpec{
				Resources: virtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64M")}},
				Devices:   virtv1.Devices{Disks: []virtv1.Disk{{Name: "root"}}},
			}, Volumes: []virtv1.Volume{{Name: "root", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "example/disk:1"}}}}},
		}},
	}
}

func isSnapshot(ns string, vms int) func(tea.Msg) bool {
	return func(m tea.Msg) bool {
		s, ok := m.(SnapshotMsg)
		return ok && s.Namespace == ns && len(s.VMs) == vms
	}
}

func isConn(down bool) func(tea.Msg) bool {
	return func(m tea.Msg) bool {
		c, ok := m.(ConnMsg)
		return ok && (c.Err != nil) == down
	}
}

// The Source against a real apiserver through a proxy: the first snapshot holds the VMs,
// instances and replica sets; the detail view's events arrive (the VM's and its launcher Pod's,
// no other VM's); an outage shows as disconnected and, once the apiserver is back, as connected —
// with a change made during the outage, and without any — and switching the namespace watches
// the new one; Stop ends every watch.
func TestSourceAcrossAnOutage(t *testing.T) {
	e := testenv.Require(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	a := testVM(ns, "a")
	require.NoError(t, e.Client.Create(ctx, a))
	vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}, Spec: a.Spec.Template.Spec}
	require.NoError(t, e.Client.Create(ctx, vmi))
	rs := &virtv1.VirtualMachineInstanceReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"}, Spec: virtv1.VirtualMachineInstanceReplicaSetSpec{
		Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}, Template: a.Spec.Template}}
	require.NoError(t, e.Client.Create(ctx, rs))

	apiserver, err := url.Parse(e.Config.Host)
	require.NoError(t, err)
	p := startProxy(t, apiserver.Host)
	cfg := rest.CopyConfig(e.Config)
	cfg.Host = "https://" + p.addr
	rec := &recorder{}
	src := NewSource(watchClient(t, cfg), rec.send)
	t.Cleanup(src.Stop)

	src.Watch(1, ns)
	i := rec.waitFor(t, "the first snapshot", 0, isSnapshot(ns, 1))
	first := rec.at(i).(SnapshotMsg)
	assert.Equal(t, []string{ns + "/a Unknown"}, []string{first.VMs[0].Key() + " " + first.VMs[0].Status}, "no controller ran: no printableStatus")
	require.Len(t, first.VMIs, 1)
	require.Len(t, first.ReplicaSets, 1)
	assert.Equal(t, "0/0", first.ReplicaSets[0].Status)

	src.WatchEvents(2, ns, "a", "virt-launcher-a-x1abc")
	for _, ev := range []struct{ kind, name, reason string }{{"VirtualMachine", "a", "SuccessfulCreate"}, {"Pod", "virt-launcher-a-x1abc", "Pulling"},
		{"VirtualMachine", "b", "Other"}, {"Pod", "virt-launcher-a-b-x2abc", "Pulling"}} {
		require.NoError(t, e.Client.Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "ev-"},
			InvolvedObject: corev1.ObjectReference{Kind: ev.kind, Namespace: ns, Name: ev.name}, Reason: ev.reason, Type: "Normal",
			Message: ev.reason + " message", LastTimestamp: metav1.Now(), Count: 1}))
	}
	rec.waitFor(t, "the events of a", 0, func(m tea.Msg) bool {
		ev, ok := m.(EventsMsg)
		return ok && ev.Key == ns+"/a" && len(ev.Events) == 2
	})

	// An outage with a change made meanwhile: disconnected, then connected with the change.
	mark := rec.count()
	p.down()
	mark = rec.waitFor(t, "disconnected", mark, isConn(true))
	require.NoError(t, e.Client.Create(ctx, testVM(ns, "b")))
	p.up(t)
	rec.waitFor(t, "connected again", mark, isConn(false))
	rec.waitFor(t, "the VM created during the outage", mark, isSnapshot(ns, 2))

	// An outage with no change at all: the banner still clears.
	mark = rec.count()
	p.down()
	mark = rec.waitFor(t, "disconnected (no change)", mark, isConn(true))
	p.up(t)
	rec.waitFor(t, "connected again (no change)", mark, isConn(false))

	// Leaving the details ends the events watch, and with it any state it left: an outage seen only
	// by it would otherwise leave DISCONNECTED on for good.
	mark = rec.count()
	p.down()
	rec.waitFor(t, "disconnected (details open)", mark, isConn(true))
	src.WatchEvents(3, ns)
	src.Watch(1, "ignored") // older than the request carried out: ignored
	p.up(t)
	rec.waitFor(t, "connected again", mark, isConn(false))

	other := e.Namespace(t)
	src.Watch(4, other)
	rec.waitFor(t, "the other namespace", 0, isSnapshot(other, 0))
	src.Stop() // returns: every watch joined
	for i := 0; i < rec.count(); i++ {
		if s, ok := rec.at(i).(SnapshotMsg); ok && s.Namespace == "ignored" {
			t.Errorf("a Watch older than the one carried out started: %v", s.Namespace)
		}
	}
}

// BenchmarkWatchAt1000 is the Source over a real watch with 1,000 VMs (half with an instance):
// time from Watch to the first snapshot, the heap the watches and snapshot hold, and this
// process's CPU per watch event (a VM's status changed; the patch request itself included).
func BenchmarkWatchAt1000(b *testing.B) {
	e := testenv.Require(b, env)
	ctx := context.Background()
	ns := e.Namespace(b)
	created := make(chan error, 1000)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < 1000; i += 8 {
				v := testVM(ns, fmt.Sprintf("vm-%04d", i))
				err := e.Client.Create(ctx, v)
				if err == nil && i%2 == 0 {
					err = e.Client.Create(ctx, &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v.Name}, Spec: v.Spec.Template.Spec})
				}
				created <- err
			}
		})
	}
	wg.Wait()
	close(created)
	for err := range created {
		require.NoError(b, err)
	}
	rec := &recorder{}
	src := NewSource(watchClient(b, e.Config), rec.send)
	defer src.Stop()
	before := heap()
	start := time.Now()
	src.Watch(1, ns)
	rec.waitFor(b, "1,000 VMs", 0, isSnapshot(ns, 1000))
	b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms-first-snapshot")
	b.ReportMetric(float64(heap()-before)/(1<<20), "MiB-heap")

	const events = 100
	cpu := cpuTime()
	for i := range events {
		v := &virtv1.VirtualMachine{}
		require.NoError(b, e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("vm-%04d", i)}, v))
		v.Status.PrintableStatus = virtv1.VirtualMachinePrintableStatus(fmt.Sprintf("Bench%d", i))
		require.NoError(b, e.Client.Status().Update(ctx, v))
		want, mark := string(v.Status.PrintableStatus), rec.count()
		rec.waitFor(b, want, mark, func(m tea.Msg) bool {
			s, ok := m.(SnapshotMsg)
			return ok && len(s.VMs) == 1000 && s.VMs[i].Status == want
		})
	}
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/events/1000, "cpu-ms/event")
}

// heap is the live heap after a collection.
func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// cpuTime is this process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
