package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/nodeagent/launcherclient"
)

// networkError is a secondary network the agent cannot give the guest; the instance fails naming it.
type networkError struct{ msg string }

func (e *networkError) Error() string { return e.msg }

// prepareSecondaryNetworks does, in the launcher Pod's network namespace, what the unprivileged
// launcher cannot: for each Multus network of the instance (bridge binding), a bridge joining the
// interface Multus attached to the Pod and a tap device the launcher's user may open, named by
// launcherv1.SecondaryNetworkDevices. Re-entrant: what exists is reused. The namespace is the one
// of the process listening on the launcher's command socket (SO_PEERCRED; the agent shares the
// node's PID namespace), checked to be in the Pod's cgroup.
func prepareSecondaryNetworks(ctx context.Context, dir string, vmi *virtv1.VirtualMachineInstance, pod *corev1.Pod) error {
	var names []string
	for _, n := range vmi.Spec.Networks {
		if n.Multus != nil {
			names = append(names, n.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	netns, err := launcherNetNS(ctx, dir, pod)
	if err != nil {
		return err
	}
	defer func() { _ = netns.Close() }()
	owner := launcherUser(pod)
	return netns.Do(func(ns.NetNS) error {
		for _, name := range names {
			if err := bridgeToTap(name, owner); err != nil {
				return err
			}
		}
		return nil
	})
}

// launcherNetNS opens the network namespace of the launcher listening in dir.
func launcherNetNS(ctx context.Context, dir string, pod *corev1.Pod) (ns.NetNS, error) {
	conn, err := launcherclient.DialSocket(ctx, dir, launcherv1.CommandSocket)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("the launcher's socket is a %T, not a unix socket", conn)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) { cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return nil, err
	}
	if credErr != nil {
		return nil, fmt.Errorf("find the launcher's process: %w", credErr)
	}
	if cred.Pid <= 0 {
		return nil, errors.New("the launcher's process is not visible: the node agent needs the node's PID namespace (hostPID)")
	}
	netns, err := ns.GetNS(fmt.Sprintf("/proc/%d/ns/net", cred.Pid))
	if err != nil {
		return nil, fmt.Errorf("open the launcher's network namespace: %w", err)
	}
	// Checked after opening: the namespace is the Pod's unless the PID was reused meanwhile.
	cgroups, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cred.Pid))
	uid := string(pod.UID)
	if err != nil || !strings.Contains(string(cgroups), uid) && !strings.Contains(string(cgroups), strings.ReplaceAll(uid, "-", "_")) {
		_ = netns.Close()
		return nil, fmt.Errorf("process %d listening on the launcher's socket is not in Pod %s's cgroup", cred.Pid, pod.Name)
	}
	return netns, nil
}

// bridgeToTap joins Multus' interface for the network to a new bridge with the guest's tap device,
// in the current network namespace.
func bridgeToTap(network string, owner user) error {
	devs := launcherv1.SecondaryNetworkDevices(network)
	podLink, err := netlink.LinkByName(devs.PodInterface)
	if errors.As(err, new(netlink.LinkNotFoundError)) {
		return &networkError{fmt.Sprintf("spec.networks[name=%s]: Multus attached no interface %s to the launcher Pod", network, devs.PodInterface)}
	}
	if err != nil {
		return fmt.Errorf("look up %s: %w", devs.PodInterface, err)
	}
	bridge, err := ensureLink(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: devs.Bridge, MTU: podLink.Attrs().MTU}})
	if err != nil {
		return err
	}
	tap, err := ensureLink(&netlink.Tuntap{
		LinkAttrs: netlink.LinkAttrs{Name: devs.Tap},
		Mode:      netlink.TUNTAP_MODE_TAP,
		Flags:     netlink.TUNTAP_NO_PI, // one queue: libvirt attaches without IFF_MULTI_QUEUE
		Owner:     uint32(owner.uid),
		Group:     uint32(owner.gid),
	})
	if err != nil {
		return err
	}
	if mtu := podLink.Attrs().MTU; tap.Attrs().MTU != mtu { // a tap is created with the default MTU
		if err := netlink.LinkSetMTU(tap, mtu); err != nil {
			return fmt.Errorf("set %s's MTU: %w", devs.Tap, err)
		}
	}
	for _, l := range []netlink.Link{podLink, tap} {
		if l.Attrs().MasterIndex != bridge.Attrs().Index {
			if err := netlink.LinkSetMaster(l, bridge); err != nil {
				return fmt.Errorf("add %s to bridge %s: %w", l.Attrs().Name, devs.Bridge, err)
			}
		}
	}
	for _, l := range []netlink.Link{bridge, podLink, tap} {
		if err := noIPv6(l.Attrs().Name); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return fmt.Errorf("bring %s up: %w", l.Attrs().Name, err)
		}
	}
	return nil
}

// noIPv6 keeps a link of the layer-2 path from taking an IPv6 link-local address, so that the Pod
// itself sends nothing (router solicitations, duplicate address detection) on the guest's network.
// Nothing to do where the kernel has no IPv6.
func noIPv6(link string) error {
	err := os.WriteFile("/proc/sys/net/ipv6/conf/"+link+"/disable_ipv6", []byte("1"), 0o644)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("disable IPv6 on %s: %w", link, err)
	}
	return nil
}

// ensureLink returns the link named like want, creating it as want when there is none.
func ensureLink(want netlink.Link) (netlink.Link, error) {
	name := want.Attrs().Name
	l, err := netlink.LinkByName(name)
	if err == nil {
		if l.Type() != want.Type() {
			return nil, fmt.Errorf("%s is a %s, not a %s", name, l.Type(), want.Type())
		}
		return l, nil
	}
	if !errors.As(err, new(netlink.LinkNotFoundError)) {
		return nil, fmt.Errorf("look up %s: %w", name, err)
	}
	if err := netlink.LinkAdd(want); err != nil {
		return nil, fmt.Errorf("create %s %s: %w", want.Type(), name, err)
	}
	return netlink.LinkByName(name)
}
