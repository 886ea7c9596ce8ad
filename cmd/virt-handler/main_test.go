package main

import (
	"flag"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	"github.com/podvirt/podvirt/nodeagent"
	"github.com/podvirt/podvirt/nodeagent/accel"
)

func parse(t *testing.T, args ...string) (*options, error) {
	t.Helper()
	fs := flag.NewFlagSet("virt-handler", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return parseFlags(fs, args)
}

func TestFlagDefaults(t *testing.T) {
	t.Setenv("NODE_NAME", "n1")
	t.Setenv("POD_NAME", "virt-handler-abcde")
	t.Setenv("POD_NAMESPACE", "")
	o, err := parse(t)
	require.NoError(t, err)
	assert.Equal(t, "n1", o.nodeName)
	assert.Equal(t, "virt-handler-abcde", o.podName)
	assert.Equal(t, "podvirt", o.namespace)
	assert.Equal(t, "/var/lib/kubelet/device-plugins", o.devicePluginDir)
	assert.Equal(t, ":8186", o.listen)
	assert.Equal(t, 110, o.deviceCount)
	assert.False(t, o.useEmulation)
	assert.Equal(t, nodeagent.HostDiskBudget{Bytes: 1 << 40, Images: 256}, o.budget)

	t.Setenv("POD_NAMESPACE", "kubevirt")
	o, err = parse(t, "--kubelet-root=/k", "--use-emulation")
	require.NoError(t, err)
	assert.Equal(t, "kubevirt", o.namespace)
	assert.Equal(t, "/k/device-plugins", o.devicePluginDir)
	assert.True(t, o.useEmulation)
}

func TestBadFlagsNameTheFlag(t *testing.T) {
	_, err := parse(t, "--device-count=0")
	require.ErrorContains(t, err, "--device-count")
	_, err = parse(t, "--listen=")
	require.ErrorContains(t, err, "--listen")
	_, err = parse(t, "--host-disk-namespace-budget=lots")
	require.ErrorContains(t, err, `--host-disk-namespace-budget: "lots" is not a positive quantity`)
	_, err = parse(t, "--host-disk-namespace-images=0")
	require.ErrorContains(t, err, "--host-disk-namespace-images: must be at least 1")
	o, err := parse(t, "--host-disk-namespace-budget=200Gi", "--host-disk-namespace-images=8")
	require.NoError(t, err)
	assert.Equal(t, nodeagent.HostDiskBudget{Bytes: 200 << 30, Images: 8}, o.budget)
}

func TestKVMAdvertisedOnlyWhenUsable(t *testing.T) {
	names := func(probe accel.Result) []string {
		var out []string
		for _, r := range resources(probe, 3) {
			out = append(out, r.Name)
			assert.Equal(t, 3, r.Count)
		}
		return out
	}
	assert.NotContains(t, names(accel.Result{Why: "kvm_pvm"}), launcherv1.KVMResource)
	assert.Contains(t, names(accel.Result{KVMUsable: true}), launcherv1.KVMResource)
	assert.Contains(t, names(accel.Result{}), launcherv1.TunResource)
	assert.Contains(t, names(accel.Result{}), launcherv1.VhostNetResource)
}

func TestFaultClockSkewIsPerNode(t *testing.T) {
	o, err := parse(t, "--node-name=vm-2", "--fault-clock-skew=vm-1=-90s, vm-2=90s")
	require.NoError(t, err)
	assert.Equal(t, 90*time.Second, o.skew)
	o, err = parse(t, "--node-name=vm-3", "--fault-clock-skew=vm-1=-90s")
	require.NoError(t, err)
	assert.Zero(t, o.skew)
	for _, bad := range []string{"vm-1", "=5s", "vm-1=soon", "vm-1=25h"} {
		_, err = parse(t, "--node-name=vm-1", "--fault-clock-skew="+bad)
		require.ErrorContains(t, err, fmt.Sprintf("--fault-clock-skew: %q is not NODE=DURATION", bad))
	}
}
