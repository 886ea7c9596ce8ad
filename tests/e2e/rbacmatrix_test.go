//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// matrixFile is the RBAC matrix as data: one row per call, one column per caller, Y (served) or N
// (refused: 401, 403 or no TLS handshake).
var matrixFile = filepath.Join("testdata", "rbac-matrix.txt")

// matrix is the parsed file: the callers in column order, and each call's expected cells.
type matrix struct {
	callers []string
	rows    []matrixRow
}

type matrixRow struct {
	call  string // e.g. "get virtualmachines", "put virtualmachines/start", "port agent"
	cells []bool
}

func readMatrix(t *testing.T) matrix {
	t.Helper()
	raw, err := os.ReadFile(matrixFile)
	if err != nil {
		t.Fatal(err)
	}
	var m matrix
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if m.callers == nil {
			if fields[0] != "call" || len(fields) < 2 {
				t.Fatalf("%s:%d: the first row names the callers: call CALLER…", matrixFile, line)
			}
			m.callers = fields[1:]
			continue
		}
		if len(fields) != 2+len(m.callers) {
			t.Fatalf("%s:%d: %d fields, want the call (two words) and %d cells", matrixFile, line, len(fields), len(m.callers))
		}
		row := matrixRow{call: fields[0] + " " + fields[1]}
		for _, c := range fields[2:] {
			if c != "Y" && c != "N" {
				t.Fatalf("%s:%d: cell %q is neither Y nor N", matrixFile, line, c)
			}
			row.cells = append(row.cells, c == "Y")
		}
		m.rows = append(m.rows, row)
	}
	return m
}

// matrixCaller is one column: how it authenticates (a bearer token of its own, or nothing), and,
// for a caller inside a Pod, how it makes a call from there.
type matrixCaller struct {
	name  string
	token string
	inPod func(ctx context.Context, method, url, body string) (string, error)
	// apiServer is https://IP:PORT of the kubernetes Service, as a Pod reaches it (no cluster DNS
	// needed).
	apiServer string
}

// The RBAC matrix (tests/e2e/testdata/rbac-matrix.txt): each caller, with nothing but its own
// credentials (a token, or none), makes every call of every row, and the answer must be the cell's.
// The observed matrix is printed; a cell that differs fails naming it.
func TestRBACMatrix(t *testing.T) {
	f := framework.New(t)
	requireVirtAPI(f)
	ctx := f.Context()
	m := readMatrix(t)
	callers := matrixCallers(t, f)
	want := map[string]bool{}
	for _, c := range callers {
		want[c.name] = true
	}
	for _, name := range m.callers {
		if !want[name] {
			t.Fatalf("%s names caller %q, which the test does not set up", matrixFile, name)
		}
	}
	probes := matrixProbes(t, f)
	for call := range probes {
		if !slices.ContainsFunc(m.rows, func(r matrixRow) bool { return r.call == call }) {
			t.Errorf("%s has no row for call %q: every call the test can make is in the matrix", matrixFile, call)
		}
	}
	var rows []string
	for _, r := range m.rows {
		probe, ok := probes[r.call]
		if !ok {
			t.Errorf("%s: no probe for call %q", matrixFile, r.call)
			continue
		}
		line := fmt.Sprintf("%-48s", r.call)
		for i, name := range m.callers {
			c := callers[slices.IndexFunc(callers, func(c matrixCaller) bool { return c.name == name })]
			got, detail := probe(ctx, c)
			mark := map[bool]string{true: "Y", false: "N"}[got]
			if got != r.cells[i] {
				mark += "!"
				t.Errorf("%s by %s: %s (%s), the matrix says %s", r.call, name, map[bool]string{true: "served", false: "refused"}[got], detail, map[bool]string{true: "Y", false: "N"}[r.cells[i]])
			}
			line += fmt.Sprintf(" %-7s", mark)
		}
		rows = append(rows, line)
	}
	t.Logf("RBAC matrix (%d calls × %d callers; ! marks a cell that differs from %s):\n%-48s %s\n%s",
		len(m.rows), len(m.callers), matrixFile, "call", strings.Join(padAll(m.callers, 7), " "), strings.Join(rows, "\n"))
}

func padAll(ss []string, n int) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%-*s", n, s)
	}
	return out
}

// matrixCallers sets up the callers: ServiceAccounts bound to admin, edit and view in the test's
// namespace, one with VM rights only there, one with instance rights only there, one with edit in
// another namespace, one with no role, the node agent's token bound to its Pod, and an anonymous
// caller.
func matrixCallers(t *testing.T, f *framework.Framework) []matrixCaller {
	t.Helper()
	ctx := f.Context()
	other := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-other-"}}
	if err := f.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Client.Delete(context.Background(), other) })
	f.Create(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "vm-only"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachines"}, Verbs: []string{"*"}},
		{APIGroups: []string{subv1.GroupName}, Resources: []string{"virtualmachines/start", "virtualmachines/stop", "virtualmachines/restart", "virtualmachines/migrate"}, Verbs: []string{"update"}},
		{APIGroups: []string{subv1.GroupName}, Resources: []string{"virtualmachines/console", "virtualmachines/vnc", "virtualmachines/portforward",
			"virtualmachines/expand-spec", "virtualmachines/objectgraph"}, Verbs: []string{"get"}},
	}})
	f.Create(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "vmi-only"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachineinstances"}, Verbs: []string{"*"}},
		{APIGroups: []string{subv1.GroupName}, Resources: []string{"virtualmachineinstances/pause", "virtualmachineinstances/unpause", "virtualmachineinstances/softreboot", "virtualmachineinstances/reset",
			"virtualmachineinstances/freeze", "virtualmachineinstances/unfreeze"}, Verbs: []string{"update"}},
		{APIGroups: []string{subv1.GroupName}, Resources: []string{"virtualmachineinstances/console", "virtualmachineinstances/vnc", "virtualmachineinstances/portforward",
			"virtualmachineinstances/guestosinfo", "virtualmachineinstances/userlist", "virtualmachineinstances/filesystemlist",
			"virtualmachineinstances/objectgraph"}, Verbs: []string{"get"}},
		{APIGroups: []string{subv1.GroupName}, Resources: []string{"virtualmachineinstances/exec"}, Verbs: []string{"create"}},
	}})
	sa := func(ns, name, kind, role string) matrixCaller {
		if err := f.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
		if role != "" {
			if err := f.Client.Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
			}); err != nil {
				t.Fatal(err)
			}
		}
		tr, err := f.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return matrixCaller{name: strings.TrimPrefix(name, "m-"), token: tr.Status.Token}
	}
	callers := []matrixCaller{
		sa(f.Namespace, "m-admin", "ClusterRole", "admin"),
		sa(f.Namespace, "m-edit", "ClusterRole", "edit"),
		sa(f.Namespace, "m-view", "ClusterRole", "view"),
		sa(f.Namespace, "m-vmonly", "Role", "vm-only"),
		sa(f.Namespace, "m-vmionly", "Role", "vmi-only"),
		sa(other.Name, "m-other", "ClusterRole", "edit"),
		sa(f.Namespace, "m-nobody", "", ""),
		{name: "anon"},
	}
	// The node agent's identity: its ServiceAccount's token bound to one of its Pods, as the kubelet
	// gives it (it names the Pod's node).
	pods, err := f.Clientset.CoreV1().Pods(heartbeatv1.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=virt-handler"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("the node agents' Pods: %v (%d found)", err, len(pods.Items))
	}
	p := pods.Items[0]
	tr, err := f.Clientset.CoreV1().ServiceAccounts(heartbeatv1.Namespace).CreateToken(ctx, p.Spec.ServiceAccountName, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	callers = append(callers, matrixCaller{name: "agent", token: tr.Status.Token}, podCaller(t, f))
	// New bindings reach the authorizer's cache within seconds.
	edit := callers[1]
	f.Eventually("the matrix's role bindings are in force", time.Minute, func(ctx context.Context) (bool, error) {
		code, err := apiCall(ctx, f, edit, http.MethodGet, "/apis/kubevirt.io/v1/namespaces/"+f.Namespace+"/virtualmachines", "")
		return code == http.StatusOK, err
	})
	return callers
}

// podCaller is a plain Pod on the Pod network without a token (the probe image, no ServiceAccount
// token mounted): each call is made from inside it (probe status).
func podCaller(t *testing.T, f *framework.Framework) matrixCaller {
	t.Helper()
	pod := f.ProbePod("m-pod", corev1.RestartPolicyNever, "sleep")
	pod.Spec.AutomountServiceAccountToken = ptr.To(false)
	f.Create(pod)
	f.WaitForPodRunningReady(pod.Name, 2*time.Minute)
	bin := kubectl(t)
	svc := &corev1.Service{}
	if err := f.Client.Get(f.Context(), client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "kubernetes"}, svc); err != nil || len(svc.Spec.Ports) == 0 {
		t.Fatalf("the kubernetes Service: %v", err)
	}
	api := "https://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
	return matrixCaller{name: "pod", apiServer: api, inPod: func(ctx context.Context, method, url, body string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, "--kubeconfig", framework.Kubeconfig(), "exec", "-n", f.Namespace, pod.Name, "--",
			"/probe", "status", "--method", method, "--url", url, "--body", body).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("probe status in %s: %w: %s", pod.Name, err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}}
}

// podStatus is the code a pod caller's call answered (0 and the error when none).
func podStatus(ctx context.Context, c matrixCaller, method, url, body string) (int, string) {
	out, err := c.inPod(ctx, method, url, body)
	if err != nil {
		return 0, err.Error()
	}
	var code int
	if _, err := fmt.Sscanf(out, "status %d", &code); err != nil {
		return 0, "no answer: " + out
	}
	return code, fmt.Sprintf("%s %s from a Pod: %d", method, url, code)
}

// apiCall makes one call to the kube-apiserver as c (its token only, or nothing) and returns the
// status code.
func apiCall(ctx context.Context, f *framework.Framework, c matrixCaller, method, path, body string) (int, error) {
	cfg := &rest.Config{Host: f.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: f.Config.CAData, CAFile: f.Config.CAFile}, BearerToken: c.token}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return 0, err
	}
	defer hc.CloseIdleConnections()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(cfg.Host, "/")+path, rd)
	if err != nil {
		return 0, err
	}
	if method == http.MethodPatch {
		req.Header.Set("Content-Type", "application/merge-patch+json")
	} else if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, nil
}

type matrixProbe func(ctx context.Context, c matrixCaller) (served bool, detail string)

// apiProbe serves when the answer is neither 401 nor 403 (an absent object's 404, a dry run's 201, a
// body's 400 or 422 all mean the call got past authorization).
func apiProbe(f *framework.Framework, method, path, body string) matrixProbe {
	return func(ctx context.Context, c matrixCaller) (bool, string) {
		if c.inPod != nil { // the apiserver's Service, as a Pod reaches it
			code, detail := podStatus(ctx, c, method, c.apiServer+path, body)
			// No answer at all is no refusal: counted as served, so the cell fails and says why.
			return code != http.StatusUnauthorized && code != http.StatusForbidden, detail
		}
		code, err := apiCall(ctx, f, c, method, path, body)
		if err != nil {
			return false, err.Error()
		}
		return code != http.StatusUnauthorized && code != http.StatusForbidden, fmt.Sprintf("%s %s: %d", method, path, code)
	}
}

// portProbe serves when a GET of url with c's token answers 2xx.
func portProbe(url string) matrixProbe {
	return func(ctx context.Context, c matrixCaller) (bool, string) {
		if c.inPod != nil {
			code, detail := podStatus(ctx, c, http.MethodGet, url, "")
			return code/100 == 2, detail
		}
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the caller plays anything on the network
		defer hc.CloseIdleConnections()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err.Error()
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			var opErr *net.OpError
			if errors.As(err, &opErr) || strings.Contains(err.Error(), "tls") || strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "reset") {
				return false, "no TLS handshake: " + err.Error()
			}
			return false, err.Error()
		}
		defer resp.Body.Close()
		return resp.StatusCode/100 == 2, fmt.Sprintf("GET %s: %d", url, resp.StatusCode)
	}
}

// matrixProbes are the calls the matrix's rows name.
func matrixProbes(t *testing.T, f *framework.Framework) map[string]matrixProbe {
	t.Helper()
	ns := f.Namespace
	probes := map[string]matrixProbe{}
	kinds := []struct{ group, version, resource, kind string }{
		{"kubevirt.io", "v1", "virtualmachines", "VirtualMachine"},
		{"kubevirt.io", "v1", "virtualmachineinstances", "VirtualMachineInstance"},
		{"kubevirt.io", "v1", "virtualmachineinstancereplicasets", "VirtualMachineInstanceReplicaSet"},
		{"kubevirt.io", "v1", "virtualmachineinstancemigrations", "VirtualMachineInstanceMigration"},
		{"instancetype.kubevirt.io", "v1beta1", "virtualmachineinstancetypes", "VirtualMachineInstancetype"},
		{"instancetype.kubevirt.io", "v1beta1", "virtualmachinepreferences", "VirtualMachinePreference"},
		{"instancetype.kubevirt.io", "v1beta1", "virtualmachineclusterinstancetypes", "VirtualMachineClusterInstancetype"},
		{"instancetype.kubevirt.io", "v1beta1", "virtualmachineclusterpreferences", "VirtualMachineClusterPreference"},
	}
	for _, k := range kinds {
		base := "/apis/" + k.group + "/" + k.version + "/namespaces/" + ns + "/" + k.resource
		if strings.Contains(k.resource, "cluster") {
			base = "/apis/" + k.group + "/" + k.version + "/" + k.resource
		}
		obj := fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{"name":"rbac-probe"}}`, k.group+"/"+k.version, k.kind)
		put := fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{"name":"rbac-absent","resourceVersion":"1"}}`, k.group+"/"+k.version, k.kind)
		probes["get "+k.resource] = apiProbe(f, http.MethodGet, base+"/rbac-absent", "")
		probes["list "+k.resource] = apiProbe(f, http.MethodGet, base, "")
		probes["watch "+k.resource] = apiProbe(f, http.MethodGet, base+"?watch=true&timeoutSeconds=1", "")
		probes["create "+k.resource] = apiProbe(f, http.MethodPost, base+"?dryRun=All", obj)
		probes["update "+k.resource] = apiProbe(f, http.MethodPut, base+"/rbac-absent", put)
		probes["patch "+k.resource] = apiProbe(f, http.MethodPatch, base+"/rbac-absent", "{}")
		probes["delete "+k.resource] = apiProbe(f, http.MethodDelete, base+"/rbac-absent", "")
		probes["deletecollection "+k.resource] = apiProbe(f, http.MethodDelete, base+"?dryRun=All", "")
	}
	for _, s := range subv1.Table() {
		param := strings.NewReplacer("{port}", "22", "{protocol}", "tcp").Replace(s.Params[0])
		path := "/apis/" + subv1.GroupName + "/v1" + strings.NewReplacer("{namespace}", ns, "{name}", "rbac-absent").Replace(s.Path(param))
		body := ""
		if s.Method != http.MethodGet {
			body = "{}"
		}
		probes[strings.ToLower(s.Method)+" "+s.Resource+"/"+s.Name] = apiProbe(f, s.Method, path, body)
	}
	probes["get version"] = apiProbe(f, http.MethodGet, "/apis/"+subv1.GroupName+"/v1/"+subv1.Version, "")

	// Internal ports, reached directly (as any Pod could) with the caller's token.
	agentHost, _, _ := net.SplitHostPort(nodeAgentAddr)
	probes["port agent-8186"] = portProbe("https://" + nodeAgentAddr + "/healthz")
	probes["port agent-metrics-8187"] = portProbe("https://" + net.JoinHostPort(agentHost, "8187") + "/metrics")
	for _, p := range []struct{ label, port, path, row string }{
		{"virt-api", "8443", "/apis/" + subv1.GroupName + "/v1/" + subv1.Version, "port virt-api-8443"},
		{"virt-api", "9443", "/healthz", "port webhooks-9443"},
		{"virt-controller", "8080", "/metrics", "port controller-metrics-8080"},
	} {
		pods, err := f.Clientset.CoreV1().Pods(heartbeatv1.Namespace).List(f.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + p.label})
		if err != nil || len(pods.Items) == 0 || pods.Items[0].Status.PodIP == "" {
			t.Fatalf("%s's Pod: %v", p.label, err)
		}
		probes[p.row] = portProbe("https://" + net.JoinHostPort(pods.Items[0].Status.PodIP, p.port) + p.path)
	}
	return probes
}
