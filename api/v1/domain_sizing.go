package v1

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// GuestMemory is the memory the guest sees: spec.domain.memory.guest, else
// spec.domain.resources.requests.memory, else limits.memory (the request defaults to the limit). The controller sizes the launcher Pod with it and the
// launcher gives qemu exactly this much; an error names the field when it is missing or not positive.
func (d *DomainSpec) GuestMemory() (resource.Quantity, error) {
	if d.Memory != nil && d.Memory.Guest != nil {
		if d.Memory.Guest.Sign() <= 0 {
			return resource.Quantity{}, errors.New("spec.domain.memory.guest: must be positive")
		}
		return d.Memory.Guest.DeepCopy(), nil
	}
	if q, ok := d.Resources.Requests[corev1.ResourceMemory]; ok {
		if q.Sign() <= 0 {
			return resource.Quantity{}, errors.New("spec.domain.resources.requests.memory: must be positive")
		}
		return q.DeepCopy(), nil
	}
	if q, ok := d.Resources.Limits[corev1.ResourceMemory]; ok { // the request defaults to the limit
		if q.Sign() <= 0 {
			return resource.Quantity{}, errors.New("spec.domain.resources.limits.memory: must be positive")
		}
		return q.DeepCopy(), nil
	}
	return resource.Quantity{}, errors.New("spec.domain.resources.requests.memory: required (or spec.domain.memory.guest, or limits.memory)")
}

// hugepageSizes are the huge page sizes guest memory can be backed with, as the kubelet names its
// hugepages-<size> resources, in bytes.
var hugepageSizes = map[string]int64{"2Mi": 2 << 20, "1Gi": 1 << 30}

// HugepageSize is the size in bytes of the huge pages backing the guest's memory, 0 without
// memory.hugepages. It refuses a size the nodes do not offer and a guest memory that is not a whole
// number of pages.
func (d *DomainSpec) HugepageSize() (int64, error) {
	if d.Memory == nil || d.Memory.Hugepages == nil {
		return 0, nil
	}
	size, ok := hugepageSizes[d.Memory.Hugepages.PageSize]
	if !ok {
		return 0, fmt.Errorf("spec.domain.memory.hugepages.pageSize: %q is not a huge page size (2Mi or 1Gi)", d.Memory.Hugepages.PageSize)
	}
	guest, err := d.GuestMemory()
	if err != nil {
		return 0, err
	}
	if guest.Value()%size != 0 {
		return 0, fmt.Errorf("spec.domain.memory.hugepages.pageSize: the guest memory (%s) is not a whole number of %s pages", guest.String(), d.Memory.Hugepages.PageSize)
	}
	return size, nil
}

// CheckMemoryLimit refuses a memory limit below the guest's memory (the launcher Pod's limit is the
// guest's memory plus the launcher's overhead; less could never run).
func (d *DomainSpec) CheckMemoryLimit(guest resource.Quantity) error {
	if q, ok := d.Resources.Limits[corev1.ResourceMemory]; ok && q.Cmp(guest) < 0 {
		return fmt.Errorf("spec.domain.resources.limits.memory (%s) is less than the guest memory (%s)", q.String(), guest.String())
	}
	return nil
}

// Defaults the API applies (at admission) and the launcher assumes when a field is empty.
const (
	// DefaultMachineType is spec.domain.machine.type when unset.
	DefaultMachineType = "q35"
	// DefaultArchitecture is the guests' (and the nodes') architecture, the only one Podvirt runs.
	DefaultArchitecture = "amd64"
	// DefaultInterfaceModel is an interface's model when unset.
	DefaultInterfaceModel = "virtio"
)

// MachineType is spec.domain.machine.type, or the default.
func (d *DomainSpec) MachineType() string {
	if d.Machine != nil && d.Machine.Type != "" {
		return d.Machine.Type
	}
	return DefaultMachineType
}

// CPUTopology is the guest's sockets, cores and threads, each defaulting to 1.
func (d *DomainSpec) CPUTopology() (sockets, cores, threads int) {
	sockets, cores, threads = 1, 1, 1
	if c := d.CPU; c != nil {
		sockets, cores, threads = orOne(c.Sockets), orOne(c.Cores), orOne(c.Threads)
	}
	return sockets, cores, threads
}

// VCPUs is the guest's virtual CPU count: sockets × cores × threads of CPUTopology.
func (d *DomainSpec) VCPUs() int {
	sockets, cores, threads := d.CPUTopology()
	return sockets * cores * threads
}

func orOne(v uint32) int {
	if v == 0 {
		return 1
	}
	return int(v)
}
