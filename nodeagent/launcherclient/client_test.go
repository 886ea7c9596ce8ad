package launcherclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/nodeagent/launcherclient"
	"github.com/podvirt/podvirt/nodeagent/launchertest"
)

// longDir is a private directory as deep as the kubelet's: its socket path does not fit a unix address.
func longDir(t *testing.T) string {
	dir := launcherv1.HostPrivateDir(filepath.Join(t.TempDir(), "var", "lib", "kubelet"), "0b4c5a57-8d1e-4e0f-9a0c-6a4f3b0f2d11")
	require.Greater(t, len(filepath.Join(dir, launcherv1.CommandSocket)), 108, "the test must exercise the long-path dial")
	return dir
}

func startLauncher(t *testing.T, dir string) *launchertest.Launcher {
	t.Helper()
	l, err := launchertest.Start(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func TestProtocolOverRealSocket(t *testing.T) {
	for name, dir := range map[string]string{"short path": t.TempDir(), "kubelet-length path": longDir(t)} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			l := startLauncher(t, dir)
			c := launcherclient.New(dir)

			v, err := c.Ping(ctx)
			require.NoError(t, err)
			assert.Equal(t, launcherv1.Version, v)

			st, err := c.Status(ctx)
			require.NoError(t, err)
			assert.Equal(t, launcherv1.DomainNone, st.State)

			vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: "ns"}}
			raw, err := json.Marshal(vmi)
			require.NoError(t, err)
			st, err = c.Sync(ctx, launcherv1.SyncRequest{VMI: raw, Emulation: true})
			require.NoError(t, err)
			assert.Equal(t, launcherv1.DomainRunning, st.State)
			assert.True(t, st.Emulation)
			require.Len(t, l.Syncs(), 1)
			assert.JSONEq(t, string(raw), string(l.Syncs()[0].VMI), "the launcher got the VMI as sent")

			st, err = c.Pause(ctx)
			require.NoError(t, err)
			assert.Equal(t, launcherv1.DomainPaused, st.State)

			_, err = c.Pause(ctx)
			var lerr *launcherclient.Error
			require.ErrorAs(t, err, &lerr, "pausing a paused guest is refused")
			assert.Equal(t, http.StatusConflict, lerr.StatusCode)
			assert.Equal(t, launcherv1.PathPause, lerr.Path)
			assert.Contains(t, lerr.Message, `guest is "Paused"`, "the launcher's message is decoded from its JSON error body")
			assert.False(t, errors.Is(err, launcherclient.ErrUnreachable))

			st, err = c.Unpause(ctx)
			require.NoError(t, err)
			assert.Equal(t, launcherv1.DomainRunning, st.State)

			require.NoError(t, c.Shutdown(ctx, 7))
			assert.Equal(t, []launcherv1.ShutdownRequest{{GracePeriodSeconds: 7}}, l.Shutdowns())
			st, err = c.Status(ctx)
			require.NoError(t, err)
			assert.Equal(t, launcherv1.DomainShuttingDown, st.State)

			require.NoError(t, c.Kill(ctx))
			assert.Equal(t, 1, l.Kills())
			st, err = c.Status(ctx)
			require.NoError(t, err)
			assert.Equal(t, launcherv1.DomainCrashed, st.State)

			require.NoError(t, l.Close())
			_, err = c.Status(ctx)
			require.ErrorIs(t, err, launcherclient.ErrUnreachable, "a launcher that stopped serving is unreachable")
		})
	}
}

func TestUnreachableWhenNoSocket(t *testing.T) {
	for name, dir := range map[string]string{"missing socket": t.TempDir(), "missing dir": longDir(t)} {
		t.Run(name, func(t *testing.T) {
			_, err := launcherclient.New(dir).Status(context.Background())
			require.ErrorIs(t, err, launcherclient.ErrUnreachable)
			assert.True(t, strings.Contains(err.Error(), "launcher"), err.Error())
		})
	}
}

func TestExitStatus(t *testing.T) {
	dir := longDir(t)
	l := startLauncher(t, dir)
	c := launcherclient.New(dir)
	st, err := c.ExitStatus()
	require.NoError(t, err)
	assert.Nil(t, st, "no exit file while the launcher runs")

	final := launcherv1.Status{State: launcherv1.DomainCrashed, Reason: "QemuCrashed", Message: "qemu exited unexpectedly"}
	require.NoError(t, l.Exit(final))
	_, err = c.Status(context.Background())
	require.ErrorIs(t, err, launcherclient.ErrUnreachable)
	st, err = c.ExitStatus()
	require.NoError(t, err)
	require.NotNil(t, st)
	assert.Equal(t, final, *st)
}
