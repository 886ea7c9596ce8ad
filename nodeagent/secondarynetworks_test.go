package nodeagent

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
)

// freshNetNS is a new, empty network namespace (removed when the test ends).
func freshNetNS(t *testing.T) ns.NetNS {
	t.Helper()
	name := fmt.Sprintf("pvtest-%d", os.Getpid())
	runtime.LockOSThread() // NewNamed moves this thread into the namespace: move it back
	orig, err := netns.Get()
	require.NoError(t, err)
	created, err := netns.NewNamed(name)
	restoreErr := netns.Set(orig)
	_ = orig.Close()
	if restoreErr == nil {
		runtime.UnlockOSThread() // else the thread ends with the goroutine
	}
	require.NoError(t, err, "create a network namespace (needs root)")
	_ = created.Close()
	t.Cleanup(func() { _ = netns.DeleteNamed(name) })
	target, err := ns.GetNS("/var/run/netns/" + name)
	require.NoError(t, err)
	t.Cleanup(func() { _ = target.Close() })
	return target
}

// In a Pod's network namespace with Multus' interface, the agent makes a bridge joining it to a
// tap device the launcher's user owns, everything up; doing it again changes nothing. Without
// Multus' interface it fails naming the network.
func TestBridgeToTap(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root to create a network namespace: run the node agent's tests as root, as make test does")
	}
	target := freshNetNS(t)
	devs := launcherv1.SecondaryNetworkDevices("blue")
	require.NoError(t, target.Do(func(ns.NetNS) error {
		// Multus' interface: one end of a veth pair, as the bridge plugin makes it.
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: devs.PodInterface, MTU: 1400}, PeerName: "peer0"})
	}))
	owner := user{uid: 107, gid: 108}
	for range 2 {
		require.NoError(t, target.Do(func(ns.NetNS) error { return bridgeToTap("blue", owner) }))
	}
	require.NoError(t, target.Do(func(ns.NetNS) error {
		bridge, err := netlink.LinkByName(devs.Bridge)
		require.NoError(t, err)
		assert.Equal(t, "bridge", bridge.Type())
		tap, err := netlink.LinkByName(devs.Tap)
		require.NoError(t, err)
		tt, ok := tap.(*netlink.Tuntap)
		require.True(t, ok, "%s is a %s", devs.Tap, tap.Type())
		assert.Equal(t, netlink.TUNTAP_MODE_TAP, tt.Mode)
		assert.Equal(t, [2]uint32{107, 108}, [2]uint32{tt.Owner, tt.Group}, "owner and group")
		assert.Zero(t, tt.Flags&netlink.TUNTAP_MULTI_QUEUE, "libvirt attaches to a single-queue tap")
		assert.Equal(t, 1400, tap.Attrs().MTU, "the tap has the Pod interface's MTU")
		pod, err := netlink.LinkByName(devs.PodInterface)
		require.NoError(t, err)
		for _, l := range []netlink.Link{pod, tap} {
			assert.Equal(t, bridge.Attrs().Index, l.Attrs().MasterIndex, "%s on the bridge", l.Attrs().Name)
		}
		for _, l := range []netlink.Link{bridge, pod, tap} {
			assert.NotZero(t, l.Attrs().RawFlags&1, "%s is up", l.Attrs().Name) // IFF_UP
			v6, err := os.ReadFile("/proc/sys/net/ipv6/conf/" + l.Attrs().Name + "/disable_ipv6")
			require.NoError(t, err)
			assert.Equal(t, "1\n", string(v6), "%s has no IPv6 address", l.Attrs().Name)
		}
		links, err := netlink.LinkList()
		require.NoError(t, err)
		assert.Len(t, links, 5, "lo, the veth pair, one bridge, one tap")
		return nil
	}))

	err := target.Do(func(ns.NetNS) error { return bridgeToTap("red", owner) })
	var nerr *networkError
	require.True(t, errors.As(err, &nerr), "a permanent error: %v", err)
	assert.Contains(t, err.Error(), "spec.networks[name=red]: Multus attached no interface "+launcherv1.SecondaryNetworkDevices("red").PodInterface)
}
