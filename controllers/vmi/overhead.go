package vmi

import (
	"k8s.io/apimachinery/pkg/api/resource"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// Overhead is the memory a launcher Pod needs beyond its guest's memory. The defaults are measured
// (docs/performance.md): the launcher process with libvirt, qemu's own memory beside guest RAM, and
// under emulation the translation-block cache the launcher configures.
type Overhead struct {
	// Fixed is the launcher, libvirt and the console-log container together.
	Fixed resource.Quantity
	// PerVCPU is added for each virtual CPU (qemu's per-vCPU threads and stacks).
	PerVCPU resource.Quantity
	// Emulation is added under software emulation (TCG translation cache and code buffers).
	Emulation resource.Quantity
}

// DefaultOverhead is the measured default overhead.
func DefaultOverhead() Overhead {
	return Overhead{
		Fixed:     resource.MustParse("96Mi"),
		PerVCPU:   resource.MustParse("8Mi"),
		Emulation: resource.MustParse("64Mi"),
	}
}

// For is the overhead of one instance.
func (o Overhead) For(vmi *virtv1.VirtualMachineInstance, emulation bool) resource.Quantity {
	total := o.Fixed.DeepCopy()
	for range vcpus(vmi) {
		total.Add(o.PerVCPU)
	}
	if emulation {
		total.Add(o.Emulation)
	}
	return total
}

// vcpus is sockets × cores × threads, each defaulting to 1.
func vcpus(vmi *virtv1.VirtualMachineInstance) int {
	c := vmi.Spec.Domain.CPU
	if c == nil {
		return 1
	}
	n := 1
	for _, v := range []uint32{c.Sockets, c.Cores, c.Threads} {
		if v > 0 {
			n *= int(v)
		}
	}
	return n
}
