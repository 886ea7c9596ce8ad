package cli

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/podvirt/podvirt/console"
)

// run executes the root command with args and no cluster: flag errors must come before any request.
func run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	cmd := NewCommand(name, streams)
	cmd.SetArgs(append(args, "--kubeconfig=/nonexistent"))
	cmd.SetOut(out)
	cmd.SetErr(out)
	err := cmd.Execute()
	return out.String(), err
}

func TestFlagErrorsComeFirst(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"stop", "vm", "--force"}, "virtctl stop: --force needs --grace-period"},
		{[]string{"stop", "vm", "--force", "--grace-period=4611686018427387904"}, "virtctl stop: --grace-period must be at most 31536000 seconds"},
		{[]string{"restart", "vm", "--grace-period=3"}, "virtctl restart: --grace-period is only used with --force"},
		{[]string{"start", "vm", "--wait", "--dry-run"}, "--wait and --dry-run do not go together"},
		{[]string{"start", "vm", "--timeout=0s"}, "--timeout must be positive"},
		{[]string{"console", "vm", "--escape", "ab"}, `--escape: "ab" is not ^X or a single character`},
		{[]string{"console", "vm", "--expect", "("}, "--expect: error parsing regexp"},
		{[]string{"console", "vm", "--timeout", "0"}, "--timeout must be a positive number of minutes"},
		{[]string{"console", "vm", "--timeout", "9223372036854775807"}, "--timeout must be a positive number of minutes up to 525600 (a year)"},
		{[]string{"pause", "vmx", "vm"}, `the first argument must be vm or vmi, got "vmx"`},
		{[]string{"pause", "vm"}, "accepts 2 arg(s), received 1"},
		{[]string{"start"}, "accepts 1 arg(s), received 0"},
		{[]string{"port-forward", "vmx/a", "80"}, `"vmx/a": the type must be vm or vmi`},
		{[]string{"port-forward", "vm/a", "80:99999"}, `"80:99999": the remote port must be a number 1-65535`},
		{[]string{"port-forward", "--stdio", "vm/a", "80", "81"}, "--stdio carries exactly one port, got 2"},
		{[]string{"vnc", "vm", "--port", "70000"}, "--port must be 0-65535"},
		{[]string{"vnc", "vm", "-o", "json"}, "--output goes with --proxy-only"},
		{[]string{"expose", "vm", "a"}, "--port is required"},
		{[]string{"expose", "vm", "a", "--port", "80", "--type", "Ingress"}, `--type must be ClusterIP, NodePort or LoadBalancer, got "Ingress"`},
		{[]string{"expose", "pod", "a", "--port", "80"}, `the first argument must be vm, vmi or vmirs, got "pod"`},
		{[]string{"create", "vm", "--memory", "lots"}, `--memory: "lots" is not a positive quantity`},
		{[]string{"create", "vm", "--run-strategy", "Sometimes"}, `--run-strategy: "Sometimes" is not Always`},
		{[]string{"create", "vm", "--cloud-init-user-data", "not base64!"}, "--cloud-init-user-data must be base64"},
		{[]string{"create", "vm", "--volume-containerdisk", "image:x"}, `volume "image:x": unknown key "image"`},
		{[]string{"create", "vm", "--cloud-init-user-data-file", "/nonexistent"}, "--cloud-init-user-data-file: open /nonexistent"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := run(t, "virtctl", tc.args...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, ExitError, ExitCode(err))
		})
	}
}

func TestKubectlPluginNameInHelpAndErrors(t *testing.T) {
	assert.Equal(t, "kubectl virt", CommandName("/usr/local/bin/kubectl-virt"))
	assert.Equal(t, "virtctl", CommandName("./virtctl"))
	out, err := run(t, "kubectl virt", "--help")
	require.NoError(t, err)
	assert.Contains(t, out, "kubectl virt [command]")
	_, err = run(t, "kubectl virt", "stop", "vm", "--force")
	assert.ErrorContains(t, err, "see 'kubectl virt stop --help'")
}

var update = flag.Bool("update", false, "rewrite the golden help texts in testdata/")

// The help a user reads, as virtctl and as the kubectl plugin: a change to it shows in review.
func TestGoldenHelp(t *testing.T) {
	for name, file := range map[string]string{"virtctl": "help-virtctl.txt", "kubectl virt": "help-kubectl-virt.txt"} {
		var b strings.Builder
		for _, args := range [][]string{{"--help"}, {"start", "--help"}, {"console", "--help"}} {
			out, err := run(t, name, args...)
			require.NoError(t, err)
			b.WriteString("$ " + name + " " + strings.Join(args, " ") + "\n" + out + "\n")
		}
		got := strings.ReplaceAll(b.String(), os.Getenv("HOME"), "$HOME") // kubectl's --cache-dir default
		path := filepath.Join("testdata", file)
		if *update {
			require.NoError(t, os.MkdirAll("testdata", 0o755))
			require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		}
		want, err := os.ReadFile(path)
		require.NoError(t, err, "run go test ./cli -run TestGoldenHelp -update to create it")
		assert.Equal(t, string(want), got, "help differs from %s (run with -update if intended)", path)
	}
}

func TestParseEscape(t *testing.T) {
	for in, want := range map[string]byte{"^]": 29, "^C": 3, "q": 'q'} {
		got, err := parseEscape(in)
		require.NoError(t, err)
		assert.Equal(t, want, got, in)
	}
}

func TestExitCodes(t *testing.T) {
	assert.Equal(t, ExitOK, ExitCode(nil))
	assert.Equal(t, ExitTimeout, ExitCode(timeout(assert.AnError)))
	assert.Equal(t, ExitError, ExitCode(assert.AnError))
}

// guest serves one console websocket that echoes input and prints a banner first.
func guest(t *testing.T) *websocket.Conn {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := console.Upgrade(w, r)
		if err != nil {
			return
		}
		defer ws.Close()
		_ = ws.WriteMessage(websocket.BinaryMessage, []byte("login: "))
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				return
			}
			_ = ws.WriteMessage(websocket.BinaryMessage, append([]byte("echo:"), data...))
		}
	}))
	t.Cleanup(srv.Close)
	ws, _, err := console.Dialer().Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	require.NoError(t, err)
	return ws
}

func TestSessionExpectAndEscape(t *testing.T) {
	var out bytes.Buffer
	input := make(chan []byte, 1)
	input <- []byte("uname\n")
	close(input)
	s := &session{ws: guest(t), out: &out, expect: regexp.MustCompile(`echo:uname`)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.run(ctx, input, 0))
	assert.True(t, s.matched, "output %q", out.String())
	assert.Contains(t, out.String(), "login: ")

	out.Reset()
	input = make(chan []byte, 1)
	input <- []byte("ls\x1drest")
	s = &session{ws: guest(t), out: &out}
	require.NoError(t, s.run(ctx, input, 29))
	assert.True(t, s.userEnded, "the escape key ends the session")
}

func TestCreateVMPrintsAManifestKubectlApplies(t *testing.T) {
	out, err := run(t, "virtctl", "create", "vm", "--name", "web", "--memory", "1Gi", "--run-strategy", "Halted",
		"--volume-containerdisk", "src:quay.io/containerdisks/fedora:41", "--volume-pvc", "src:data,name:data",
		"--ssh-key", "ssh-ed25519 AAAA user@host")
	require.NoError(t, err)
	for _, want := range []string{
		"apiVersion: kubevirt.io/v1", "kind: VirtualMachine", "name: web", "runStrategy: Halted", "memory: 1Gi",
		"image: quay.io/containerdisks/fedora:41", "name: web-containerdisk-0", "claimName: data",
		"ssh_authorized_keys:", "- ssh-ed25519 AAAA user@host",
	} {
		assert.Contains(t, out, want)
	}
	out, err = run(t, "virtctl", "create", "vm", "--name", "web", "-o", "json")
	require.NoError(t, err)
	assert.Contains(t, out, `"kind": "VirtualMachine"`)

	out, err = run(t, "virtctl", "create", "vm", "--name", "sized", "--instancetype", "u1.medium", "--preference", "vmpref/fedora")
	require.NoError(t, err)
	assert.Contains(t, out, "instancetype:\n    name: u1.medium\n")
	assert.Contains(t, out, "preference:\n    kind: VirtualMachinePreference\n    name: fedora\n")
	assert.NotContains(t, out, "memory:", "the instancetype sets the memory")

	for args, want := range map[string]string{
		"--instancetype u1.medium --memory 1Gi":          "--memory cannot be used with --instancetype",
		"--instancetype nosuchkind/x":                    `--instancetype: unknown kind "nosuchkind"`,
		"--preference virtualmachinepreference/Bad_Name": `--preference: "Bad_Name" is not a valid name`,
	} {
		_, err := run(t, "virtctl", append([]string{"create", "vm"}, strings.Fields(args)...)...)
		assert.ErrorContains(t, err, want, args)
	}
}

func TestSSHAndSCPUseTheLocalClientThroughPortForward(t *testing.T) {
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	kube := genericclioptions.NewConfigFlags(true)
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	kube.AddFlags(fs)
	require.NoError(t, fs.Parse([]string{"--kubeconfig=/k/config", "-n", "ns1"}))
	sshCmd, scpCmd := newSSHCommand(kube, streams), newSCPCommand(kube, streams)
	self, err := os.Executable()
	require.NoError(t, err)

	o := &SSHOptions{clientSource: clientSource{kube: kube}, Port: 22, IdentityFile: "/id", Command: "uname -a", flagArgs: []string{"--kubeconfig=/k/config", "--as=alice"}}
	require.NoError(t, o.Complete(sshCmd, []string{"fedora@vm/web"}))
	assert.Equal(t, []string{"-o", "ProxyCommand=" + shellQuote(self) + " port-forward --stdio --kubeconfig=/k/config --as=alice vm/web.ns1 22",
		"-o", "HostKeyAlias=vm.web.ns1", "-p", "22", "-i", "/id", "fedora@vm.web.ns1", "uname -a"}, o.args)

	o = &SSHOptions{clientSource: clientSource{kube: kube}, Port: 2222, scp: true, Recursive: true, flagArgs: []string{"--kubeconfig=/k/config"}}
	require.NoError(t, o.Complete(scpCmd, []string{"./dir", "root@vmi/db.other:/tmp/"}))
	assert.Equal(t, []string{"-r", "-o", "ProxyCommand=" + shellQuote(self) + " port-forward --stdio --kubeconfig=/k/config vmi/db.other 2222",
		"-o", "HostKeyAlias=vmi.db.other", "-P", "2222", "./dir", "root@vmi.db.other:/tmp/"}, o.args)

	assert.ErrorContains(t, (&SSHOptions{clientSource: clientSource{kube: kube}, Port: 22, scp: true}).Complete(scpCmd, []string{"a", "b"}),
		"one of SOURCE and DESTINATION must be remote")
	assert.ErrorContains(t, (&SSHOptions{clientSource: clientSource{kube: kube}, Port: 22}).Complete(sshCmd, []string{"web"}),
		`"web": name the VM as vm/NAME or vmi/NAME`)
	assert.Equal(t, `'a b'`, shellQuote("a b"))
}

// apiRecorder is a fake kube-apiserver that records the requests the commands send and answers
// them (202, or the Status given for a path).
type apiRecorder struct {
	mu       sync.Mutex
	requests []string
	refuse   map[string]string // path → a Status body answered with 409
}

func (a *apiRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	a.requests = append(a.requests, r.Method+" "+r.URL.Path+" "+string(body))
	refusal, refused := a.refuse[r.URL.Path]
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if refused {
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, refusal)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func TestCommandsSendKubeVirtsRequests(t *testing.T) {
	const base = "/apis/subresources.kubevirt.io/v1/namespaces/ns1/"
	api := &apiRecorder{refuse: map[string]string{base + "virtualmachines/halted/stop": `{"kind":"Status","apiVersion":"v1","status":"Failure",` +
		`"message":"Operation cannot be fulfilled on virtualmachines.kubevirt.io \"halted\": VM is not running","reason":"Conflict","code":409}`}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"start", "vm", "--paused", "--dry-run"}, "PUT " + base + `virtualmachines/vm/start {"paused":true,"dryRun":["All"]}`},
		{[]string{"stop", "vm", "--force", "--grace-period=0"}, "PUT " + base + `virtualmachines/vm/stop {"gracePeriod":0}`},
		{[]string{"restart", "vm"}, "PUT " + base + `virtualmachines/vm/restart {}`},
		{[]string{"pause", "vmi", "x"}, "PUT " + base + `virtualmachineinstances/x/pause {}`},
		{[]string{"unpause", "vm", "x", "--dry-run"}, "PUT " + base + `virtualmachineinstances/x/unpause {"dryRun":["All"]}`},
		{[]string{"softreboot", "x"}, "PUT " + base + `virtualmachineinstances/x/softreboot {}`},
		{[]string{"soft-reboot", "x"}, "PUT " + base + `virtualmachineinstances/x/softreboot {}`},
		{[]string{"reset", "x"}, "PUT " + base + `virtualmachineinstances/x/reset {}`},
		{[]string{"migrate", "x"}, "PUT " + base + `virtualmachines/x/migrate {}`},
		{[]string{"freeze", "x", "--unfreeze-timeout", "90s"}, "PUT " + base + `virtualmachineinstances/x/freeze {"unfreezeTimeout":"1m30s"}`},
		{[]string{"unfreeze", "x"}, "PUT " + base + `virtualmachineinstances/x/unfreeze {}`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			api.mu.Lock()
			api.requests = nil
			api.mu.Unlock()
			streams, _, _, _ := genericiooptions.NewTestIOStreams()
			cmd := NewCommand("virtctl", streams)
			cmd.SetArgs(append(tc.args, "--server", srv.URL, "-n", "ns1"))
			require.NoError(t, cmd.Execute())
			assert.Equal(t, []string{tc.want}, api.requests)
		})
	}
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	cmd := NewCommand("virtctl", streams)
	cmd.SetArgs([]string{"stop", "halted", "--server", srv.URL, "-n", "ns1"})
	err := cmd.Execute()
	require.Error(t, err)
	assert.Equal(t, `Operation cannot be fulfilled on virtualmachines.kubevirt.io "halted": VM is not running`, err.Error(), "the server's own message")
	assert.Equal(t, ExitError, ExitCode(err))
}

// A console refused while its instance moves or restarts is dialled again until --timeout; a
// refusal that will not change ends the command at once.
func TestConsoleRedialsWhatGoesAway(t *testing.T) {
	gr := schema.GroupResource{Group: "kubevirt.io", Resource: "virtualmachineinstances"}
	o := &ConsoleOptions{Name: "mover", Timeout: 1}
	var errOut bytes.Buffer
	o.ErrOut = &errOut
	later := time.Now().Add(time.Minute)
	reported := ""
	for _, err := range []error{
		apierrors.NewServiceUnavailable("node agent on vm-2: serial0.sock: no such file or directory"),
		apierrors.NewServiceUnavailable("node agent on vm-2: serial0.sock: no such file or directory"),
		apierrors.NewNotFound(gr, "mover"),
		apierrors.NewConflict(gr, "mover", assert.AnError),
	} {
		assert.NoError(t, o.redialable(err, later, &reported))
	}
	assert.Equal(t, 3, strings.Count(errOut.String(), "waiting for the console of vmi/mover to answer"), "each reason told once:\n%s", errOut.String())

	err := o.redialable(apierrors.NewForbidden(gr, "mover", assert.AnError), later, &reported)
	assert.ErrorContains(t, err, "console of vmi/mover")
	assert.Equal(t, ExitError, ExitCode(err))

	err = o.redialable(apierrors.NewServiceUnavailable("still moving"), time.Now(), &reported)
	assert.ErrorContains(t, err, "did not answer within 1 minutes")
	assert.Equal(t, ExitTimeout, ExitCode(err))
}

func TestVersionClientPrintsKubeVirtsFormat(t *testing.T) {
	out, err := run(t, "virtctl", "version", "--client")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(out, `Client Version: version.Info{GitVersion:"(devel)"`), "output %q", out)
}
