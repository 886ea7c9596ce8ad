package nodeagent

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	"github.com/podvirt/podvirt/internal/scheme"
)

// The agent vouches for its launchers only while its own heartbeat is fresh, so that a launcher
// on a node cut off from the control plane fences its guest before the controllers (80 s) start
// the VM elsewhere.
func TestHeartbeatFreshness(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	h := &Heartbeat{Client: fake.NewClientBuilder().WithScheme(scheme.New()).Build(), Namespace: "podvirt", NodeName: "n1", Holder: "agent", Interval: heartbeatv1.RenewInterval, Clock: clk}
	assert.False(t, h.Fresh(), "fresh before the first renewal")
	require.NoError(t, h.renew(context.Background()))
	assert.True(t, h.Fresh())
	clk.SetTime(clk.Now().Add(heartbeatv1.VouchLimit))
	assert.True(t, h.Fresh(), "fresh at the limit")
	clk.SetTime(clk.Now().Add(time.Second))
	assert.False(t, h.Fresh(), "fresh past the limit")
	// The order the fencing relies on: vouching stops, the launcher's limit passes, and only then
	// does the controllers' default threshold (2×LeaseDuration) fail the instance.
	assert.Greater(t, heartbeatv1.MinThreshold, heartbeatv1.VouchLimit+launcherv1.AgentSilenceLimit)
	assert.GreaterOrEqual(t, 2*heartbeatv1.LeaseDuration, heartbeatv1.MinThreshold, "virt-controller's default threshold")
}
