package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
)

// exec sends the command (and stdin with -i), prints the guest's stdout and stderr on the matching
// streams and exits with the command's exit code; flags are checked before any request.
func TestExecPrintsOutputAndExitsWithTheCommandsCode(t *testing.T) {
	var got subv1.ExecRequest
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.Method + " " + r.URL.Path
		body, _ := io.ReadAll(r.Body)
		require.NoError(t, json.Unmarshal(body, &got))
		res := subv1.ExecResult{ExitCode: 3, Stdout: []byte("out:" + string(got.Stdin)), Stderr: []byte("err\n")}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	}))
	defer srv.Close()
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))

	streams, in, out, errOut := genericiooptions.NewTestIOStreams()
	in.WriteString("hello")
	cmd := NewCommand("virtctl", streams)
	cmd.SetArgs([]string{"exec", "vm1", "-i", "--timeout", "90s", "--server", srv.URL, "-n", "ns1", "--", "sh", "-c", "cat; exit 3"})
	err := cmd.Execute()
	assert.Equal(t, 3, ExitCode(err), "the command's exit code: %v", err)
	assert.EqualError(t, err, "command terminated with exit code 3")
	assert.Equal(t, "POST /apis/subresources.kubevirt.io/v1/namespaces/ns1/virtualmachineinstances/vm1/exec", path)
	assert.Equal(t, []string{"sh", "-c", "cat; exit 3"}, got.Command)
	assert.Equal(t, "hello", string(got.Stdin))
	assert.Equal(t, int64(90), got.TimeoutSeconds)
	assert.Equal(t, "out:hello", out.String())
	assert.Equal(t, "err\n", errOut.String())

	for args, want := range map[string]string{
		"exec vm1":                         "want NAME -- COMMAND",
		"exec vm1 uname":                   "want NAME -- COMMAND",
		"exec vm1 --timeout 0s -- true":    "--timeout must be between 1s and 1h0m0s",
		"exec vm1 --timeout 2h -- true":    "--timeout must be between 1s and 1h0m0s",
		"exec -- true":                     "want NAME -- COMMAND",
		"freeze vm1 --unfreeze-timeout 2h": "--unfreeze-timeout: unfreezeTimeout: must be between 1s and 1h0m0s (0: 5m0s), got 2h0m0s",
		"guestosinfo vm1 -o wide":          "--output must be json or yaml",
	} {
		_, err := run(t, "virtctl", strings.Fields(args)...)
		assert.ErrorContains(t, err, want, args)
	}
	big := append(strings.Fields("exec vm1 --"), strings.Repeat("a", subv1.MaxExecArgBytes+1))
	_, err = run(t, "virtctl", big...)
	assert.ErrorContains(t, err, "command: at most 16384 bytes in all")
}

// guestosinfo prints what the server answered, as indented JSON or as YAML.
func TestGuestOSInfoPrintsTheAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "/apis/subresources.kubevirt.io/v1/namespaces/ns1/virtualmachineinstances/vm1/guestosinfo", r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"guestAgentVersion":"7.2","os":{"id":"podvirt"}}`)
	}))
	defer srv.Close()
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	for format, want := range map[string]string{
		"json": "{\n  \"guestAgentVersion\": \"7.2\",\n  \"os\": {\n    \"id\": \"podvirt\"\n  }\n}\n",
		"yaml": "guestAgentVersion: \"7.2\"\nos:\n  id: podvirt\n",
	} {
		streams, _, out, _ := genericiooptions.NewTestIOStreams()
		cmd := NewCommand("virtctl", streams)
		cmd.SetArgs([]string{"guestosinfo", "vm1", "-o", format, "--server", srv.URL, "-n", "ns1"})
		require.NoError(t, cmd.Execute())
		assert.Equal(t, want, out.String(), format)
	}
}
