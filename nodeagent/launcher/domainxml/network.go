package domainxml

import (
	"crypto/sha256"
	"fmt"
	"net"
	"slices"
	"strings"

	"libvirt.org/go/libvirtxml"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// DefaultNetwork is the name of the pod network interface added when the spec declares none.
const DefaultNetwork = "default"

// addInterfaces adds one NIC per spec.domain.devices.interfaces entry. On the pod network it is
// user-mode networking (slirp), which is masquerade: the guest's traffic leaves with the Pod's
// address and the declared ports are forwarded from the Pod's address to the guest (Plan.Ports,
// applied by the launcher once qemu runs); it needs no privilege, no tap device and no bridge in the
// Pod. On a Multus network (bridge binding) it opens the tap device the node agent created for the
// launcher's user and bridged to Multus' interface (launcherv1.SecondaryNetworkDevices).
func addInterfaces(plan *Plan, vmi *virtv1.VirtualMachineInstance) error {
	ifaces, networks := vmi.Spec.Domain.Devices.Interfaces, vmi.Spec.Networks
	if vmi.Spec.DefaultPodInterface() {
		ifaces = []virtv1.Interface{{Name: DefaultNetwork, Masquerade: &virtv1.InterfaceMasquerade{}}}
		networks = []virtv1.Network{{Name: DefaultNetwork, NetworkSource: virtv1.NetworkSource{Pod: &virtv1.PodNetwork{}}}}
	}
	byName := map[string]*virtv1.Network{}
	for i := range networks {
		byName[networks[i].Name] = &networks[i]
	}
	for i := range ifaces {
		iface := &ifaces[i]
		field := fmt.Sprintf("spec.domain.devices.interfaces[%d]", i)
		netw, ok := byName[iface.Name]
		if !ok {
			return fmt.Errorf("%s: no network named %q in spec.networks", field, iface.Name)
		}
		nic, err := baseInterface(vmi, iface, field)
		if err != nil {
			return err
		}
		switch {
		case netw.Pod != nil:
			err = userInterface(&nic, iface, netw.Pod, field)
		case netw.Multus != nil:
			err = tapInterface(&nic, iface, field)
		default:
			err = fmt.Errorf("spec.networks[name=%s]: only the pod network and Multus networks are supported", netw.Name)
		}
		if err != nil {
			return err
		}
		plan.Domain.Devices.Interfaces = append(plan.Domain.Devices.Interfaces, nic)
		plan.InterfaceNames = append(plan.InterfaceNames, iface.Name)
		if netw.Pod == nil {
			continue // a bridged guest is reached at its own address: nothing to forward
		}
		if plan.PodInterface == "" {
			plan.PodInterface = iface.Name
		}
		if err := addPorts(plan, iface, field); err != nil {
			return err
		}
	}
	if plan.PodInterface != "" {
		forwardProbePorts(plan, vmi, plan.PodInterface)
	}
	return nil
}

// addPorts forwards the interface's declared ports to the guest.
func addPorts(plan *Plan, iface *virtv1.Interface, field string) error {
	for j, p := range iface.Ports {
		proto := strings.ToLower(p.Protocol)
		if proto == "" {
			proto = "tcp"
		}
		if proto != "tcp" && proto != "udp" {
			return fmt.Errorf("%s.ports[%d].protocol: %q is not TCP or UDP", field, j, p.Protocol)
		}
		if p.Port < 1 || p.Port > 65535 {
			return fmt.Errorf("%s.ports[%d].port: %d is out of range 1-65535", field, j, p.Port)
		}
		plan.Ports = append(plan.Ports, PortForward{Interface: iface.Name, Protocol: proto, Port: p.Port})
	}
	return nil
}

// forwardProbePorts forwards the guest ports the readiness and liveness probes reach (the kubelet
// runs them against the Pod's address) through the first pod network interface, unless declared.
func forwardProbePorts(plan *Plan, vmi *virtv1.VirtualMachineInstance, iface string) {
	for _, p := range []*virtv1.Probe{vmi.Spec.ReadinessProbe, vmi.Spec.LivenessProbe} {
		if p == nil || p.HTTPGet == nil {
			continue
		}
		port := p.HTTPGet.Port.IntVal
		if port < 1 || port > 65535 || slices.ContainsFunc(plan.Ports, func(f PortForward) bool { return f.Protocol == "tcp" && f.Port == port }) {
			continue
		}
		plan.Ports = append(plan.Ports, PortForward{Interface: iface, Protocol: "tcp", Port: port})
	}
}

// baseInterface is a NIC's model, MAC address and boot order, whatever its network.
func baseInterface(vmi *virtv1.VirtualMachineInstance, iface *virtv1.Interface, field string) (libvirtxml.DomainInterface, error) {
	var nic libvirtxml.DomainInterface
	if iface.PciAddress != "" {
		return nic, fmt.Errorf("%s.pciAddress: not supported", field)
	}
	model := iface.Model
	if model == "" {
		model = virtv1.DefaultInterfaceModel
	}
	mac := iface.MacAddress
	if mac == "" {
		mac = StableMAC(vmi, iface.Name)
	}
	hw, err := net.ParseMAC(strings.ReplaceAll(mac, "-", ":"))
	if err != nil || len(hw) != 6 {
		return nic, fmt.Errorf("%s.macAddress: %q is not a MAC address", field, iface.MacAddress)
	}
	nic = libvirtxml.DomainInterface{
		MAC:   &libvirtxml.DomainInterfaceMAC{Address: hw.String()},
		Model: &libvirtxml.DomainInterfaceModel{Type: model},
	}
	if iface.BootOrder != nil {
		nic.Boot = &libvirtxml.DomainDeviceBoot{Order: *iface.BootOrder}
	}
	return nic, nil
}

// userInterface makes nic a libvirt <interface type='user'> on the pod network.
func userInterface(nic *libvirtxml.DomainInterface, iface *virtv1.Interface, pod *virtv1.PodNetwork, field string) error {
	if iface.Bridge != nil {
		return fmt.Errorf("%s.bridge: not supported with user-mode pod networking (use masquerade)", field)
	}
	nic.Source = &libvirtxml.DomainInterfaceSource{User: &libvirtxml.DomainInterfaceSourceUser{}}
	v4, v6, err := pod.GuestCIDRs()
	if err != nil {
		return fmt.Errorf("spec.networks[name=%s].pod.%w", iface.Name, err)
	}
	for _, n := range []struct {
		family string
		ipnet  *net.IPNet
	}{{"ipv4", v4}, {"ipv6", v6}} {
		if n.ipnet != nil {
			ones, _ := n.ipnet.Mask.Size()
			nic.IP = append(nic.IP, libvirtxml.DomainInterfaceIP{Family: n.family, Address: n.ipnet.IP.String(), Prefix: uint(ones)})
		}
	}
	return nil
}

// tapInterface makes nic a libvirt <interface type='ethernet'> on the tap device the node agent made
// for a Multus network (bridge binding): libvirt opens it, and changes nothing about it (managed='no').
func tapInterface(nic *libvirtxml.DomainInterface, iface *virtv1.Interface, field string) error {
	if iface.Bridge == nil {
		return fmt.Errorf("%s: a Multus network is joined with the bridge binding only", field)
	}
	nic.Source = &libvirtxml.DomainInterfaceSource{Ethernet: &libvirtxml.DomainInterfaceSourceEthernet{}}
	nic.Target = &libvirtxml.DomainInterfaceTarget{Dev: launcherv1.SecondaryNetworkDevices(iface.Name).Tap, Managed: "no"}
	return nil
}

// StableMAC derives a MAC address from the VMI's namespace, name and the interface name, so a VM keeps
// its MAC across restarts (qemu's 52:54:00 prefix, locally administered range).
func StableMAC(vmi *virtv1.VirtualMachineInstance, iface string) string {
	sum := sha256.Sum256([]byte(vmi.Namespace + "/" + vmi.Name + "/" + iface))
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", sum[0], sum[1], sum[2])
}
