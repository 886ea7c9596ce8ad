package v1

import (
	"fmt"
	"net"
	"strings"
)

// Network is a network the guest's interfaces attach to.
//
// +kubebuilder:validation:XValidation:rule="[has(self.pod), has(self.multus), has(self.resourceClaim)].filter(x, x).size() == 1",message="a network must set exactly one of pod, multus, resourceClaim"
type Network struct {
	// Name the interfaces refer to: a DNS-1123 label (it names files and devices on the node).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	NetworkSource `json:",inline"`
}

// NetworkSource is where a network comes from; exactly one field is set.
type NetworkSource struct {
	// Pod is the Pod's own network.
	// +optional
	Pod *PodNetwork `json:"pod,omitempty"`
	// Multus is a secondary network from a NetworkAttachmentDefinition.
	// +optional
	Multus *MultusNetwork `json:"multus,omitempty"`
	// ResourceClaim is a network device allocated through DRA (an entry of spec.resourceClaims).
	// +optional
	ResourceClaim *NetworkClaimRequest `json:"resourceClaim,omitempty"`
}

// PodNetwork is the Pod's own network.
type PodNetwork struct {
	// VMNetworkCIDR is the guest-side IPv4 network used with masquerade.
	// +optional
	VMNetworkCIDR string `json:"vmNetworkCIDR,omitempty"`
	// VMIPv6NetworkCIDR is the guest-side IPv6 network used with masquerade.
	// +optional
	VMIPv6NetworkCIDR string `json:"vmIPv6NetworkCIDR,omitempty"`
}

// GuestCIDRs parses VMNetworkCIDR and VMIPv6NetworkCIDR (nil when unset). As KubeVirt does, an
// IPv4 octet with leading zeros is read as decimal ("10.10.010.0/24" is 10.10.10.0/24: KubeVirt
// kept it for compatibility). Each must leave the guest and its gateway an address: a prefix of at
// most 30 (IPv4) or 126 (IPv6). An error names the field.
func (p *PodNetwork) GuestCIDRs() (v4, v6 *net.IPNet, err error) {
	parse := func(name, value string, bits, maxOnes int) (*net.IPNet, error) {
		if value == "" {
			return nil, nil
		}
		if len(value) > maxCIDRLength {
			return nil, fmt.Errorf("%s: longer than %d characters", name, maxCIDRLength)
		}
		_, ipnet, err := net.ParseCIDR(withoutLeadingZeros(value))
		if err != nil || len(ipnet.Mask)*8 != bits { // an IPv4-mapped IPv6 CIDR is IPv6
			return nil, fmt.Errorf("%s: %q is not an IPv%d CIDR", name, value, map[int]int{32: 4, 128: 6}[bits])
		}
		if ones, _ := ipnet.Mask.Size(); ones > maxOnes {
			return nil, fmt.Errorf("%s: %q leaves no room for the guest and its gateway (prefix at most /%d)", name, value, maxOnes)
		}
		return ipnet, nil
	}
	if v4, err = parse("vmNetworkCIDR", p.VMNetworkCIDR, 32, 30); err != nil {
		return nil, nil, err
	}
	if v6, err = parse("vmIPv6NetworkCIDR", p.VMIPv6NetworkCIDR, 128, 126); err != nil {
		return nil, nil, err
	}
	return v4, v6, nil
}

// maxCIDRLength bounds a guest CIDR's text (an IPv6 CIDR takes at most 49 characters).
const maxCIDRLength = 64

// withoutLeadingZeros drops the leading zeros of a dotted IPv4 CIDR's octets ("10.10.010.0/24" is
// 10.10.10.0/24, decimal, as KubeVirt reads it); anything else is returned as it is.
func withoutLeadingZeros(cidr string) string {
	addr, bits, ok := strings.Cut(cidr, "/")
	octets := strings.Split(addr, ".")
	if !ok || len(octets) != 4 {
		return cidr
	}
	for i, o := range octets {
		if t := strings.TrimLeft(o, "0"); t != "" {
			octets[i] = t
		} else if o != "" {
			octets[i] = "0"
		}
	}
	return strings.Join(octets, ".") + "/" + bits
}

// MultusNetwork is a network defined by a Multus NetworkAttachmentDefinition.
type MultusNetwork struct {
	// NetworkName is the NetworkAttachmentDefinition, as name or namespace/name.
	NetworkName string `json:"networkName"`
	// Default makes this network the Pod's default network instead of the cluster network.
	// +optional
	Default bool `json:"default,omitempty"`
}

// NetworkClaimRequest points at one request of one of the instance's resource claims.
type NetworkClaimRequest struct {
	// ClaimName is the name of an entry in spec.resourceClaims.
	// +optional
	ClaimName string `json:"claimName,omitempty"`
	// RequestName is the device request inside that claim.
	// +optional
	RequestName string `json:"requestName,omitempty"`
}

// DefaultPodInterface reports whether the guest gets the default pod network interface: none is
// declared (nor any network) and autoattachPodInterface is not false.
func (s *VirtualMachineInstanceSpec) DefaultPodInterface() bool {
	auto := s.Domain.Devices.AutoattachPodInterface
	return len(s.Domain.Devices.Interfaces) == 0 && len(s.Networks) == 0 && (auto == nil || *auto)
}

// HasPodInterface reports whether the guest has a NIC on the pod network: the default one, or a
// declared interface whose network is the pod network.
func (s *VirtualMachineInstanceSpec) HasPodInterface() bool {
	if s.DefaultPodInterface() {
		return true
	}
	for _, i := range s.Domain.Devices.Interfaces {
		for _, n := range s.Networks {
			if n.Name == i.Name && n.Pod != nil {
				return true
			}
		}
	}
	return false
}

// Attachment is the NetworkAttachmentDefinition the network names: networkName is "name" (in
// namespace, the instance's) or "namespace/name"; ok is false for anything else.
func (m *MultusNetwork) Attachment(namespace string) (ns, name string, ok bool) {
	ns, name, qualified := strings.Cut(m.NetworkName, "/")
	if !qualified {
		ns, name = namespace, m.NetworkName
	}
	return ns, name, ns != "" && name != "" && !strings.Contains(name, "/")
}
