//go:build bench

package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/podvirt/podvirt/internal/scheme"
	"github.com/podvirt/podvirt/internal/testenv"
)

// kwokNodeAnnotation marks the nodes kwok plays.
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// kwokStages are the files of kwok's own "fast" stages (in its module, PODVIRT_KWOK_STAGES): nodes
// become Ready, Pods become Running and Ready at once, and deleted Pods go.
var kwokStages = []string{"node/fast/node-initialize.yaml", "pod/fast/pod-ready.yaml", "pod/fast/pod-complete.yaml", "pod/fast/pod-delete.yaml"}

// controlPlane is the scale benchmark's simulated cluster: envtest's kube-apiserver and etcd with
// Podvirt's CRDs; kube-controller-manager (replica sets, garbage collector); kube-scheduler; kwok
// playing the kubelets of many nodes; the built virt-controller as its own process (its CPU and
// memory are measured). The node agent's part is played in the benchmark itself (agentSim).
type controlPlane struct {
	te         *envtest.Environment
	cfg        *rest.Config
	client     client.WithWatch
	kube       kubernetes.Interface
	dir        string
	procs      []*process
	controller *process
}

// startControlPlane starts everything with nodes kwok nodes, kube-scheduler's client limited to
// schedulerQPS; the binaries come from KUBEBUILDER_ASSETS (Kubernetes), PODVIRT_KWOK and
// PODVIRT_VIRT_CONTROLLER.
func startControlPlane(ctx context.Context, nodes, schedulerQPS int) (*controlPlane, error) {
	for _, env := range []string{"KUBEBUILDER_ASSETS", "PODVIRT_KWOK", "PODVIRT_KWOK_STAGES", "PODVIRT_VIRT_CONTROLLER"} {
		if os.Getenv(env) == "" {
			return nil, fmt.Errorf("%s is not set: run `make bench-scale`", env)
		}
	}
	dir, err := os.MkdirTemp("", "podvirt-scale-")
	if err != nil {
		return nil, err
	}
	cp := &controlPlane{dir: dir, te: &envtest.Environment{
		CRDDirectoryPaths: []string{testenv.RepoPath("install", "crds")}, ErrorIfCRDPathMissing: true, Scheme: scheme.New(),
	}}
	if cp.cfg, err = cp.te.Start(); err != nil {
		_ = cp.te.Stop()
		return nil, fmt.Errorf("start kube-apiserver and etcd: %w", err)
	}
	if err := cp.startComponents(ctx, schedulerQPS); err != nil {
		cp.stop()
		return nil, err
	}
	if err := cp.addNodes(ctx, nodes); err != nil {
		cp.stop()
		return nil, err
	}
	return cp, nil
}

func (cp *controlPlane) startComponents(ctx context.Context, schedulerQPS int) error {
	user, err := cp.te.AddUser(envtest.User{Name: "scale-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("admin user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return err
	}
	kc := filepath.Join(cp.dir, "kubeconfig")
	if err := os.WriteFile(kc, kubeconfig, 0o600); err != nil {
		return err
	}
	cfg := rest.CopyConfig(cp.cfg)
	cfg.QPS, cfg.Burst = 1000, 2000 // the benchmark's own client: never the bottleneck
	if cp.client, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()}); err != nil {
		return err
	}
	if cp.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if err := cp.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "podvirt"}}); err != nil {
		return fmt.Errorf("namespace podvirt: %w", err)
	}
	stages, err := cp.kwokConfig()
	if err != nil {
		return err
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	for _, c := range []struct {
		name, bin string
		args      []string
	}{
		// The replica set controller unthrottled, as virt-controller's client (controller-runtime
		// leaves rate limiting to the apiserver's priority and fairness).
		{"kube-controller-manager", filepath.Join(assets, "kube-controller-manager"), []string{"--kubeconfig=" + kc,
			"--controllers=replicaset,garbagecollector", "--leader-elect=false", "--secure-port=0", "--kube-api-qps=1000", "--kube-api-burst=2000"}},
		// The scheduler's client as clusters run it unless told (kube-scheduler's default 50 QPS,
		// burst 100: it binds at most about 50 Pods a second).
		{"kube-scheduler", filepath.Join(assets, "kube-scheduler"), []string{"--kubeconfig=" + kc, "--leader-elect=false", "--secure-port=0",
			fmt.Sprintf("--kube-api-qps=%d", schedulerQPS), fmt.Sprintf("--kube-api-burst=%d", 2*schedulerQPS)}},
		{"kwok", os.Getenv("PODVIRT_KWOK"), []string{"--kubeconfig=" + kc, "--config=" + stages, "--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
			"--cidr=10.0.0.0/12", "--server-address=127.0.0.1:0"}},
		{controllerComponent, os.Getenv("PODVIRT_VIRT_CONTROLLER"), []string{"--kubeconfig=" + kc, "--leader-elect=false", "--metrics-bind-address=0",
			"--health-probe-bind-address=0", "--use-emulation", "--namespace=podvirt", "--node-heartbeat-threshold=24h"}},
	} {
		p, err := startProcess(cp.dir, c.name, c.bin, c.args...)
		if err != nil {
			return err
		}
		cp.procs = append(cp.procs, p)
		if c.name == controllerComponent {
			cp.controller = p
		}
	}
	return nil
}

// kwokConfig writes kwok's stage files, from its module, as one config file.
func (cp *controlPlane) kwokConfig() (string, error) {
	var docs []string
	for _, f := range kwokStages {
		data, err := os.ReadFile(filepath.Join(os.Getenv("PODVIRT_KWOK_STAGES"), f))
		if err != nil {
			return "", fmt.Errorf("kwok stage: %w", err)
		}
		docs = append(docs, string(data))
	}
	path := filepath.Join(cp.dir, "kwok-stages.yaml")
	return path, os.WriteFile(path, []byte(strings.Join(docs, "\n---\n")), 0o600)
}

// addNodes creates the kwok nodes (32 CPUs, 256 GiB, 110 Pods each) and waits until they are Ready.
func (cp *controlPlane) addNodes(ctx context.Context, n int) error {
	for i := range n {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("kwok-node-%03d", i),
			Annotations: map[string]string{kwokNodeAnnotation: "fake"},
			Labels:      map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok"}}}
		capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods: resource.MustParse("110")}
		node.Status.Capacity, node.Status.Allocatable = capacity, capacity
		if err := cp.client.Create(ctx, node); err != nil {
			return fmt.Errorf("node %s: %w", node.Name, err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var nodes corev1.NodeList
		if err := cp.client.List(ctx, &nodes); err != nil {
			return err
		}
		ready := 0
		for _, nd := range nodes.Items {
			for _, c := range nd.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready == n {
			return cp.untaint(ctx, nodes.Items)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d kwok nodes Ready after 2 minutes (kwok's log: %s)", ready, n, filepath.Join(cp.dir, "kwok.log"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// untaint removes the not-ready taint the apiserver puts on new nodes: here no node lifecycle
// controller runs to remove it once kwok reports them Ready.
func (cp *controlPlane) untaint(ctx context.Context, nodes []corev1.Node) error {
	for i := range nodes {
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"taints":null}}`))
		if err := cp.client.Patch(ctx, &nodes[i], patch); err != nil {
			return fmt.Errorf("untaint %s: %w", nodes[i].Name, err)
		}
	}
	return nil
}

func (cp *controlPlane) stop() {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		cp.procs[i].stop()
	}
	_ = cp.te.Stop()
	_ = os.RemoveAll(cp.dir)
}

// writes are the apiserver's count of mutating requests by resource (apiserver_request_total).
func (cp *controlPlane) writes(ctx context.Context) (map[string]float64, error) {
	raw, err := cp.kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("apiserver metrics: %w", err)
	}
	return parseWrites(string(raw)), nil
}

var requestLine = regexp.MustCompile(`^apiserver_request_total\{(.*)\} ([0-9.e+]+)$`)
var labelPair = regexp.MustCompile(`(\w+)="([^"]*)"`)

// parseWrites sums apiserver_request_total for POST, PUT, PATCH, APPLY and DELETE by resource (with
// its subresource), refused ones (409 conflicts) included.
func parseWrites(metrics string) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(metrics))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := requestLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, kv := range labelPair.FindAllStringSubmatch(m[1], -1) {
			labels[kv[1]] = kv[2]
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE":
		default:
			continue
		}
		n, _ := strconv.ParseFloat(m[2], 64)
		res := labels["resource"]
		if s := labels["subresource"]; s != "" {
			res += "/" + s
		}
		out[res] += n
	}
	return out
}

// process is one component running as its own process, logging to dir/NAME.log.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

func startProcess(dir, name, bin string, args ...string) (*process, error) {
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	// Killed with the benchmark even when it is (a go test timeout runs no cleanup).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{}), log: log}
	go func() { defer close(p.done); _ = cmd.Wait() }()
	return p, nil
}

// stop interrupts the process and waits for it (killing it after 10 s).
func (p *process) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.log.Close()
}

// exited reports an error if the process has ended (it should run throughout), with its log's path.
func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: see %s", p.name, p.log.Name())
	default:
		return nil
	}
}

// cpu is the process's user + system CPU time so far.
func (p *process) cpu() (time.Duration, error) { return pidCPU(p.cmd.Process.Pid) }

// pidCPU is a process's user + system CPU time so far (/proc/PID/stat, in clock ticks of 10 ms).
func pidCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	if len(fields) < 13 {
		return 0, errors.New("short /proc stat")
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// controllerComponent is virt-controller's name among the components.
const controllerComponent = "virt-controller"

// benchmarkComponent names the benchmark's own process (its clients, watches and simulated agents)
// in componentCPU.
const benchmarkComponent = "benchmark"

// componentCPU is the CPU time so far of every process of the simulated cluster: the components
// started here, envtest's kube-apiserver and etcd (children of this process, found by name) and
// the benchmark itself.
func (cp *controlPlane) componentCPU() (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, p := range cp.procs {
		c, err := p.cpu()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		out[p.name] = c
	}
	self, err := pidCPU(os.Getpid())
	if err != nil {
		return nil, err
	}
	out[benchmarkComponent] = self
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, stat := range stats {
		data, err := os.ReadFile(stat)
		if err != nil {
			continue // ended meanwhile
		}
		s := string(data)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		comm, fields := s[open+1:end], strings.Fields(s[end+1:])
		if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) || (comm != "kube-apiserver" && comm != "etcd") {
			continue
		}
		pid, _ := strconv.Atoi(strings.Fields(s)[0])
		if out[comm], err = pidCPU(pid); err != nil {
			return nil, fmt.Errorf("%s: %w", comm, err)
		}
	}
	for _, must := range []string{"kube-apiserver", "etcd"} {
		if _, ok := out[must]; !ok {
			return nil, fmt.Errorf("no %s process among this benchmark's children", must)
		}
	}
	return out, nil
}

// peakRSS is the process's peak resident set (VmHWM), in bytes.
func (p *process) peakRSS() (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM")
}
