//go:build e2e

package e2e

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/corpus"
	"github.com/podvirt/podvirt/internal/testenv"
	"github.com/podvirt/podvirt/tests/framework"
)

// badInput is one case of the bad-input corpus: what it tries, and the words its refusal must
// hold (the field, flag or limit it names).
type badInput struct {
	kind, name string
	try        func(t *testing.T) string // the refusal's message
	want       string
}

// badInputCorpus tries every case of the corpus against the running cluster — manifests,
// subresource paths and bodies, virtctl flags, websocket frames and connections — and checks each
// is refused naming what it got wrong, that none leaves an object behind (the namespace is listed
// after each), that the running instance and the halted VM are untouched, that virt-api and the
// node agents did not restart meanwhile, and how much memory they held at most since they
// started. The namespace holds "vm" (Always, running, port 80 declared) and "halted" (Halted, no
// instance).
func badInputCorpus(t *testing.T, f *framework.Framework) {
	cases := append(subresourceCases(f), manifestCases(t, f)...)
	cases = append(cases, flagCases(f)...)
	cases = append(cases, streamCases(f)...)
	before, inventoryBefore := snapshot(t, f), inventory(t, f)
	restartsBefore := restarts(t, f) // earlier tests may have restarted an agent (killed on purpose)
	refused, tried := map[string]int{}, 0
	for _, c := range cases {
		t.Run(c.kind+"/"+c.name, func(t *testing.T) {
			tried++
			got := c.try(t)
			if !strings.Contains(got, c.want) {
				t.Errorf("%s: %q, want a refusal saying %q", c.name, got, c.want)
			} else {
				refused[c.kind]++
			}
			if c.kind == "stream" {
				t.Logf("%s: %s", c.name, got)
			}
			if after := inventory(t, f); after != inventoryBefore {
				t.Errorf("%s left something behind:\nbefore %s\nafter  %s", c.name, inventoryBefore, after)
			}
		})
	}
	if after := snapshot(t, f); after != before {
		t.Errorf("refused requests changed something:\nbefore %s\nafter  %s", before, after)
	}
	virtAPINeverPanicked(t, f)
	for container, n := range restarts(t, f) {
		if n != restartsBefore[container] {
			t.Errorf("%s restarted %d times during the corpus", container, n-restartsBefore[container])
		}
	}
	kinds := make([]string, 0, len(refused))
	total := 0
	for k, n := range refused {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		total += n
	}
	sort.Strings(kinds)
	t.Logf("bad inputs: %d in the corpus, %d tried, %d refused naming the field, flag or limit (%s)", len(cases), tried, total, strings.Join(kinds, ", "))
	if len(cases) < 60 {
		t.Errorf("the corpus has %d cases, want at least 60", len(cases))
	}
	reportPeakMemory(t, f)
}

// subresourceCases are calls virt-api must refuse with a Status naming the object and the cause.
func subresourceCases(f *framework.Framework) []badInput {
	vms, vmis := "/namespaces/"+f.Namespace+"/virtualmachines/", "/namespaces/"+f.Namespace+"/virtualmachineinstances/"
	const noVM, noVMI = `virtualmachines.kubevirt.io "nope" not found`, `virtualmachineinstances.kubevirt.io "nope" not found`
	var out []badInput
	for _, c := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"PUT", vms + "nope/start", "", 404, noVM},
		{"PUT", vms + "nope/stop", "", 404, noVM},
		{"PUT", vms + "nope/restart", "", 404, noVM},
		{"PUT", vms + "nope/migrate", "", 404, noVM},
		{"PUT", vmis + "nope/pause", "", 404, noVMI},
		{"PUT", vmis + "nope/unpause", "", 404, noVMI},
		{"PUT", vmis + "nope/softreboot", "", 404, noVMI},
		{"PUT", vmis + "nope/reset", "", 404, noVMI},
		{"GET", vms + "nope/expand-spec", "", 404, noVM},
		{"GET", vmis + "nope/guestosinfo", "", 404, noVMI},
		{"GET", vmis + "nope/userlist", "", 404, noVMI},
		{"GET", vmis + "nope/filesystemlist", "", 404, noVMI},
		{"PUT", vmis + "nope/freeze", "", 404, noVMI},
		{"PUT", vmis + "nope/unfreeze", "", 404, noVMI},
		{"POST", vmis + "nope/exec", `{"command":["true"]}`, 404, noVMI},
		{"POST", vmis + "vm/exec", "{}", 400, "command: a program to run is required"},
		{"POST", vmis + "vm/exec", `{"command":["true"],"timeoutSeconds":3601}`, 400, "timeoutSeconds: must be between 0 and 3600, got 3601"},
		{"POST", vmis + "vm/exec", `{"command":["true"],"stdin":"` + strings.Repeat("QUFB", 11<<10) + `"}`, 400, "stdin: at most 32768 bytes, got 33792"},
		{"POST", vmis + "vm/exec", `{"command":["a\u0000b"]}`, 400, "command[0]: contains a NUL byte"},
		{"POST", vmis + "vm/exec", strings.Repeat(" ", 200<<10), 413, "larger than"},
		{"PUT", vmis + "vm/freeze", `{"unfreezeTimeout":"-1s"}`, 400, "unfreezeTimeout: must be between 1s and 1h0m0s (0: 5m0s), got -1s"},
		{"PUT", vmis + "vm/freeze", `{"unfreezeTimeout":"2h"}`, 400, "unfreezeTimeout: must be between 1s and 1h0m0s (0: 5m0s), got 2h0m0s"},
		{"GET", vmis + "nope/console", "", 404, noVMI},
		{"GET", vmis + "nope/vnc", "", 404, noVMI},
		{"GET", vmis + "nope/portforward/80", "", 404, noVMI},
		{"PUT", vms + "vm/start", "", 409, `virtualmachines.kubevirt.io "vm": runStrategy Always does not support manual start requests`},
		{"PUT", vms + "halted/stop", "", 409, `virtualmachines.kubevirt.io "halted": VM is not running`},
		{"PUT", vms + "halted/restart", "", 409, `virtualmachines.kubevirt.io "halted": runStrategy Halted does not support manual restart requests`},
		{"PUT", vms + "halted/migrate", "", 409, `virtualmachines.kubevirt.io "halted": VM is not running`},
		{"PUT", vmis + "halted/pause", "", 404, `virtualmachineinstances.kubevirt.io "halted" not found`},
		{"GET", vms + "halted/console", "", 404, `virtualmachineinstances.kubevirt.io "halted" not found`},
		{"PUT", vms + "vm/stop", "{", 400, "the request body is not valid *v1.StopOptions"},
		{"PUT", vms + "vm/stop", `{"gracePeriod":"soon"}`, 400, "gracePeriod"},
		{"PUT", vms + "vm/stop", `{"gracePeriod":-1}`, 400, "gracePeriod: must be between 0 and 31536000 seconds, got -1"},
		{"PUT", vms + "vm/stop", `{"gracePeriod":4611686018427387904}`, 400, "gracePeriod: must be between 0 and 31536000 seconds"},
		{"PUT", vms + "vm/stop", `{"gracePeriod":1e400}`, 400, "gracePeriod"},
		{"PUT", vms + "vm/start", `{"paused":true,"color":"red"}`, 400, `unknown field "color"`},
		{"PUT", vms + "vm/start", `{"paused":"yes"}`, 400, "paused"},
		{"PUT", vms + "vm/restart", strings.Repeat(" ", 70<<10), 413, "larger than 65536 bytes"},
		{"PUT", vms + "vm/migrate", strings.Repeat(" ", 70<<10), 413, "larger than 65536 bytes"},
		{"PUT", vms + "vm/migrate", `{"addedNodeSelector":{"zone":"a"}}`, 400, "addedNodeSelector: not supported"},
		{"GET", vmis + "vm/portforward/0", "", 400, `port: "0" is not a TCP port number (1-65535)`},
		{"GET", vmis + "vm/portforward/-1", "", 400, `port: "-1" is not a TCP port number`},
		{"GET", vmis + "vm/portforward/99999", "", 400, `port: "99999" is not a TCP port number`},
		{"GET", vmis + "vm/portforward/http", "", 400, `port: "http" is not a TCP port number`},
		{"GET", vmis + "vm/portforward/80/udp", "", 400, `protocol: "udp" is not supported`},
		{"PUT", vmis + "vm/unpause", "", 409, "is already running"},
	} {
		out = append(out, badInput{kind: "subresource", name: c.method + " " + strings.TrimPrefix(c.path, "/namespaces/"+f.Namespace+"/") + " " + abbreviate(c.body),
			want: c.want,
			try: func(t *testing.T) string {
				code, msg := subresource(f, c.method, c.path, c.body)
				if code != c.code {
					t.Errorf("answered %d, want %d", code, c.code)
				}
				return msg
			}})
	}
	return out
}

// subresource sends body to the subresource path and returns the answer's code and message.
func subresource(f *framework.Framework, method, path, body string) (int, string) {
	req := f.Clientset.Discovery().RESTClient().Verb(method).AbsPath("/apis/subresources.kubevirt.io/v1" + path)
	if body != "" {
		req = req.Body([]byte(body))
	}
	res := req.Do(f.Context())
	var code int
	res.StatusCode(&code)
	if err := res.Error(); err != nil {
		return code, err.Error()
	}
	return code, ""
}

func abbreviate(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("(%d bytes)", len(s))
	}
	return s
}

// manifestCases are objects the apiserver (schema) or virt-api (admission) must refuse naming the
// field: hostile names, sizes past their bounds, and every refused manifest of the API corpus
// whose refusal does not depend on the cluster's policy.
func manifestCases(t *testing.T, f *framework.Framework) []badInput {
	vm := func(name string, mutate func(*virtv1.VirtualMachineInstanceSpec)) client.Object {
		obj := demoVM(f.Namespace, name, virtv1.RunStrategyHalted, 0, "")
		mutate(&obj.Spec.Template.Spec)
		return obj
	}
	volume := func(name string, src virtv1.VolumeSource) func(*virtv1.VirtualMachineInstanceSpec) {
		return func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Volumes = append(s.Volumes, virtv1.Volume{Name: name, VolumeSource: src})
		}
	}
	hostDisk := func(path string, capacity string) virtv1.VolumeSource {
		return virtv1.VolumeSource{HostDisk: &virtv1.HostDisk{Path: path, Type: virtv1.HostDiskExistsOrCreate, Capacity: resource.MustParse(capacity)}}
	}
	const tmpl = "spec.template.spec."
	own := "/var/lib/podvirt/hostdisks/" + f.Namespace + "/"
	cases := []struct {
		name string
		obj  client.Object
		want string
	}{
		{"a volume named ../../../../usr/bin", vm("path-volume", volume("../../../../usr/bin", virtv1.VolumeSource{EmptyDisk: &virtv1.EmptyDiskSource{Capacity: resource.MustParse("1Mi")}})), tmpl + "volumes[0].name"},
		{"a configMap volume named ../../../../usr/local/bin", vm("path-configmap", volume("../../../../usr/local/bin", virtv1.VolumeSource{ConfigMap: &virtv1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}})), tmpl + "volumes[0].name"},
		{"a disk named ../launcher-exit.json", vm("path-disk", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, virtv1.Disk{Name: "../launcher-exit.json"})
		}), tmpl + "domain.devices.disks[0].name"},
		{"an interface named eth/0", vm("path-interface", func(s *virtv1.VirtualMachineInstanceSpec) { s.Domain.Devices.Interfaces[0].Name = "eth/0" }), tmpl + "domain.devices.interfaces[0].name"},
		{"a network named Net.1", vm("dotted-network", func(s *virtv1.VirtualMachineInstanceSpec) { s.Networks[0].Name = "Net.1" }), tmpl + "networks[0].name"},
		{"a volume name of 300 bytes", vm("long-volume", volume(strings.Repeat("a", 300), virtv1.VolumeSource{EmptyDisk: &virtv1.EmptyDiskSource{Capacity: resource.MustParse("1Mi")}})), tmpl + "volumes[0].name"},
		{"a 1 PiB emptyDisk", vm("huge-emptydisk", volume("scratch", virtv1.VolumeSource{EmptyDisk: &virtv1.EmptyDiskSource{Capacity: resource.MustParse("1Pi")}})), tmpl + "volumes[0].emptyDisk.capacity"},
		{"a 1 PiB hostDisk", vm("huge-hostdisk", volume("host", hostDisk(own+"big.img", "1Pi"))), tmpl + "volumes[0].hostDisk.capacity"},
		{"a hostDisk at /etc/shadow", vm("shadow-hostdisk", volume("host", hostDisk("/etc/shadow", "1Gi"))), tmpl + "volumes[0].hostDisk.path"},
		{"a hostDisk climbing out of its namespace's directory", vm("climbing-hostdisk", volume("host", hostDisk(own+"../other/a.img", "1Gi"))), tmpl + "volumes[0].hostDisk.path"},
		{"a grace period of 2^62 seconds", vm("endless-grace", func(s *virtv1.VirtualMachineInstanceSpec) { s.TerminationGracePeriodSeconds = ptr.To(int64(1) << 62) }), tmpl + "terminationGracePeriodSeconds"},
		{"a negative grace period", vm("negative-grace", func(s *virtv1.VirtualMachineInstanceSpec) { s.TerminationGracePeriodSeconds = ptr.To(int64(-1)) }), tmpl + "terminationGracePeriodSeconds"},
		{"guest memory beyond its limit", vm("too-big", func(s *virtv1.VirtualMachineInstanceSpec) {
			s.Domain.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}
		}), tmpl + "domain.resources.limits.memory"},
		{"65 volumes", vm("many-volumes", func(s *virtv1.VirtualMachineInstanceSpec) {
			for i := range 65 {
				s.Volumes = append(s.Volumes, virtv1.Volume{Name: "v" + strconv.Itoa(i), VolumeSource: virtv1.VolumeSource{EmptyDisk: &virtv1.EmptyDiskSource{Capacity: resource.MustParse("1Mi")}}})
			}
		}), tmpl + "volumes"},
		{"a run strategy Sometimes", func() client.Object {
			obj := demoVM(f.Namespace, "sometimes", virtv1.RunStrategyHalted, 0, "")
			obj.Spec.RunStrategy = ptr.To(virtv1.VirtualMachineRunStrategy("Sometimes"))
			return obj
		}(), "spec.runStrategy"},
		{"a name of 300 bytes", demoVM(f.Namespace, strings.Repeat("n", 300), virtv1.RunStrategyHalted, 0, ""), "metadata.name"},
		{"a replica set of -1 replicas", &virtv1.VirtualMachineInstanceReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: "negative"},
			Spec:       virtv1.VirtualMachineInstanceReplicaSetSpec{Replicas: ptr.To(int32(-1))},
		}, "spec.replicas"},
		{"a migration naming no instance", &virtv1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: "nothing"}}, "spec.vmiName"},
	}
	out := make([]badInput, 0, len(cases))
	for _, c := range cases {
		out = append(out, badInput{kind: "manifest", name: c.name, want: c.want, try: func(*testing.T) string { return refusal(f, c.obj) }})
	}
	manifests, err := corpus.Load(testenv.RepoPath("api", "v1", "testdata", "corpus"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range manifests {
		spec, _ := m.Object.Object["spec"].(map[string]any)
		_, instancetype := spec["instancetype"]
		_, preference := spec["preference"]
		if m.Refused == "" || strings.Contains(m.Refused, "hostDisk") || strings.Contains(m.Refused, "multus") ||
			strings.Contains(m.Refused, "evictionStrategy") || instancetype || preference {
			continue // accepted, or refused only by a policy this cluster may not have (the local one allows External), or by objects it lacks
		}
		out = append(out, badInput{kind: "manifest", name: m.File, want: m.Refused, try: func(*testing.T) string {
			obj := m.Object.DeepCopy()
			obj.SetNamespace(f.Namespace)
			return refusal(f, obj)
		}})
	}
	return out
}

// refusal creates obj (strict field validation) and returns the refusal, or says it was accepted
// (and deletes it, so that the case fails once).
func refusal(f *framework.Framework, obj client.Object) string {
	err := f.Client.Create(f.Context(), obj, client.FieldValidation("Strict"))
	if err == nil {
		_ = f.Client.Delete(f.Context(), obj)
		return "accepted"
	}
	return err.Error()
}

// flagCases run the built virtctl with flags it must refuse naming the flag, before any request.
func flagCases(f *framework.Framework) []badInput {
	var out []badInput
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"stop", "vm", "--force", "--grace-period=4611686018427387904"}, "--grace-period must be at most 31536000 seconds"},
		{[]string{"stop", "vm", "--grace-period=3"}, "--grace-period is only used with --force"},
		{[]string{"start", "vm", "--timeout=0s"}, "--timeout must be positive"},
		{[]string{"console", "vm", "--timeout", "0"}, "--timeout must be a positive number of minutes"},
		{[]string{"console", "vm", "--escape", "ab"}, `--escape: "ab" is not ^X or a single character`},
		{[]string{"port-forward", "vm/vm", "80:99999"}, `"80:99999": the remote port must be a number 1-65535`},
		{[]string{"create", "vm", "--memory", "lots"}, `--memory: "lots" is not a positive quantity`},
		{[]string{"create", "vm", "--termination-grace-period", "-5"}, "--termination-grace-period must be between 0 and 31536000 seconds"},
		{[]string{"create", "vm", "--run-strategy", "Sometimes"}, `--run-strategy: "Sometimes" is not Always`},
		{[]string{"pause", "vmx", "vm"}, `the first argument must be vm or vmi, got "vmx"`},
		{[]string{"start", "vm", "--frobnicate"}, "unknown flag: --frobnicate"},
	} {
		out = append(out, badInput{kind: "flag", name: strings.Join(c.args, " "), want: c.want, try: func(t *testing.T) string {
			msg, code := virtctl(t, f, "", c.args...)
			if code == 0 {
				t.Errorf("virtctl %s succeeded", strings.Join(c.args, " "))
			}
			return msg
		}})
	}
	return out
}

// streamCases attack the streams: a 64 MiB frame (in one piece, and in fragments), 1,000 viewers of one console that never read,
// and 10,000 connections to the node agent's port that never start TLS.
func streamCases(f *framework.Framework) []badInput {
	return []badInput{
		{kind: "stream", name: "a 64 MiB frame in one piece", want: "close 1009", try: func(t *testing.T) string {
			return oversizedFrame(t, f, func(ws *websocket.Conn) error {
				header := []byte{0x82, 0x80 | 127, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} // FIN binary, masked (key 0), 64-bit length
				binary.BigEndian.PutUint64(header[2:10], 64<<20)
				if _, err := ws.NetConn().Write(header); err != nil {
					return err
				}
				_, err := ws.NetConn().Write(make([]byte, 64<<20))
				return err
			})
		}},
		{kind: "stream", name: "a 64 MiB frame in fragments", want: "close 1009", try: func(t *testing.T) string {
			return oversizedFrame(t, f, func(ws *websocket.Conn) error { return ws.WriteMessage(websocket.BinaryMessage, make([]byte, 64<<20)) })
		}},
		{kind: "stream", name: "1,000 viewers of one console that never read", want: "the console already has 16 viewers, the limit", try: func(t *testing.T) string {
			return manyViewers(t, f, 1000)
		}},
		{kind: "stream", name: "10,000 connections to the agent that never start TLS", want: "a console opened meanwhile", try: func(t *testing.T) string {
			return silentConnections(t, f, 10000)
		}},
	}
}

// oversizedFrame sends a 64 MiB frame with send on a port-forward to the guest's web server (which
// drops what it cannot parse), reading meanwhile, and returns how the stream ended.
func oversizedFrame(t *testing.T, f *framework.Framework, send func(*websocket.Conn) error) string {
	ws, _, err := f.DialSubresource(f.Config.Host, "/namespaces/"+f.Namespace+"/virtualmachineinstances/vm/portforward/80")
	if err != nil {
		return err.Error()
	}
	sent := make(chan struct{})
	go func() { // owned: the write ends when the far end closes, at the latest with ws.Close
		defer close(sent)
		_ = send(ws)
	}()
	defer func() { _ = ws.Close(); <-sent }()
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for { // read while the frame is sent: the close frame arrives before the connection is torn down
		if _, _, err := ws.ReadMessage(); err != nil {
			return err.Error()
		}
	}
}

// manyViewers opens n viewers of the running instance's console and never reads them; it returns
// the refusal of the first viewer beyond the limit, and fails when more than the limit were let in.
func manyViewers(t *testing.T, f *framework.Framework, n int) string {
	var open []*websocket.Conn
	defer func() {
		for _, ws := range open {
			_ = ws.Close()
		}
	}()
	refusal := ""
	for range n {
		ws, resp, err := dialConsole(t, f, f.Namespace, "vm")
		if err == nil {
			open = append(open, ws)
			continue
		}
		if resp != nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
			_ = resp.Body.Close()
			if refusal == "" {
				refusal = err.Error() + ": " + string(body)
			}
		}
	}
	if len(open) > 16 { // a viewer that fell 1 MiB behind is dropped and frees its place: count those still open
		still := 0
		for _, ws := range open {
			_ = ws.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			if _, _, err := ws.ReadMessage(); err == nil || isTimeout(err) {
				still++
			}
		}
		if still > 16 {
			t.Errorf("%d viewers of one console are open at once, the limit is 16", still)
		}
	}
	return refusal
}

// silentConnections opens n TCP connections to the node agent of the running instance's node and
// sends nothing; meanwhile a console must open through virt-api. It says how many the agent closed.
func silentConnections(t *testing.T, f *framework.Framework, n int) string {
	vmi := getVMI(t, f, "vm")
	node := &corev1.Node{}
	if err := f.Client.Get(f.Context(), client.ObjectKey{Name: vmi.Status.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	addr := ""
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			addr = net.JoinHostPort(a.Address, "8186")
		}
	}
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return fmt.Sprintf("connection %d of %d to %s: %v", len(conns)+1, n, addr, err)
		}
		conns = append(conns, c)
	}
	ws, _, err := dialConsole(t, f, f.Namespace, "vm")
	if err != nil {
		return fmt.Sprintf("%d silent connections held; the console did not open: %v", n, err)
	}
	_ = ws.Close()
	closed := 0
	deadline := time.Now().Add(7 * time.Second) // past the agent's 5 s handshake timeout
	for _, c := range conns {
		_ = c.SetReadDeadline(deadline)
		if _, err := c.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
			closed++
		}
	}
	if closed != n {
		t.Errorf("the agent closed %d of %d silent connections within 7 s, want all (5 s handshake timeout)", closed, n)
	}
	return fmt.Sprintf("the agent closed %d of %d silent connections within 7 s; a console opened meanwhile", closed, n)
}

// inventory lists what a refused case must not leave behind: the namespace's objects of every
// kind a case could create, by kind and name.
func inventory(t *testing.T, f *framework.Framework) string {
	t.Helper()
	var names []string
	for _, list := range []client.ObjectList{
		&virtv1.VirtualMachineList{}, &virtv1.VirtualMachineInstanceList{}, &virtv1.VirtualMachineInstanceMigrationList{},
		&virtv1.VirtualMachineInstanceReplicaSetList{}, &corev1.PodList{}, &corev1.PersistentVolumeClaimList{},
		&corev1.ServiceList{}, &corev1.SecretList{},
	} {
		if err := f.Client.List(f.Context(), list, client.InNamespace(f.Namespace)); err != nil {
			t.Fatal(err)
		}
		items, err := metaItems(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range items {
			names = append(names, fmt.Sprintf("%T/%s", list, o.GetName()))
		}
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

// restarts counts the restarts of every container of virt-api's and the node agents' Pods, by Pod
// and container.
func restarts(t *testing.T, f *framework.Framework) map[string]int32 {
	t.Helper()
	out := map[string]int32{}
	for _, app := range []string{"virt-api", "virt-handler"} {
		pods := &corev1.PodList{}
		if err := f.Client.List(f.Context(), pods, client.InNamespace("podvirt"), client.MatchingLabels{"app.kubernetes.io/name": app}); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == 0 {
			t.Fatalf("no %s Pods found", app)
		}
		for _, p := range pods.Items {
			for _, cs := range p.Status.ContainerStatuses {
				out[p.Name+"/"+cs.Name] = cs.RestartCount
			}
		}
	}
	return out
}

// reportPeakMemory prints the most memory (VmHWM) every virt-api and node agent process on this
// machine ever held, against its container's limit: a figure (a process that reached its limit
// was OOM-killed and restarted, which virtAPINeverPanicked and agentsNeverRestarted catch). The
// processes are found on this machine: the local cluster's nodes all run here.
func reportPeakMemory(t *testing.T, f *framework.Framework) {
	t.Helper()
	for _, c := range []struct{ label, container, process string }{
		{"virt-api", "virt-api", "virt-api"},
		{"virt-handler", "virt-handler", "virt-handler"},
	} {
		pods := &corev1.PodList{}
		if err := f.Client.List(f.Context(), pods, client.InNamespace("podvirt"), client.MatchingLabels{"app.kubernetes.io/name": c.label}); err != nil {
			t.Fatal(err)
		}
		limit := int64(math.MaxInt64)
		for _, p := range pods.Items {
			for _, ctr := range p.Spec.Containers {
				if l, ok := ctr.Resources.Limits[corev1.ResourceMemory]; ok && ctr.Name == c.container {
					limit = min(limit, l.Value())
				}
			}
		}
		peaks := peakRSS(c.process)
		if len(peaks) == 0 {
			t.Errorf("no %s process found on this machine", c.process)
		}
		var shown []string
		for _, kib := range peaks {
			shown = append(shown, fmt.Sprintf("%.1f MiB", float64(kib)/1024))
		}
		t.Logf("peak memory of %s: %s (limit %d MiB each)", c.process, strings.Join(shown, ", "), limit>>20)
	}
}

// peakRSS returns the VmHWM (KiB) of every process on this machine whose command name is name.
func peakRSS(name string) []int64 {
	var out []int64
	paths, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, p := range paths {
		comm, err := os.ReadFile(p)
		if err != nil || strings.TrimSpace(string(comm)) != name {
			continue
		}
		status, err := os.ReadFile(filepath.Join(filepath.Dir(p), "status"))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(status)) {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				if kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err == nil {
					out = append(out, kib)
				}
			}
		}
	}
	return out
}

// metaItems returns a list's items as objects with metadata.
func metaItems(list client.ObjectList) ([]metav1.Object, error) {
	objs, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]metav1.Object, 0, len(objs))
	for _, o := range objs {
		m, err := apimeta.Accessor(o)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}
