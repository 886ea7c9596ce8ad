package podtemplate

import (
	"k8s.io/apimachinery/pkg/api/resource"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// Overhead is the memory a launcher Pod needs beyond its guest's memory. The defaults come from the
// measurement in docs/launcher.md (seed vm-cirros, smaps of every process in the Pod): launcher with
// embedded libvirt 9.8 MiB + qemu's own 28.1 MiB + mapped files 26.8 MiB = 64.7 MiB, rounded up to
// 80 MiB for the console-log container and headroom; the TCG translation cache the launcher caps at
// 32 MiB, rounded up to 40 MiB; per vCPU, KubeVirt's 8 MiB (not measured here: one vCPU only).
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
		Fixed:     resource.MustParse("80Mi"),
		PerVCPU:   resource.MustParse("8Mi"),
		Emulation: resource.MustParse("40Mi"),
	}
}

// For is the overhead of one instance.
func (o Overhead) For(vmi *virtv1.VirtualMachineInstance, emulation bool) resource.Quantity {
	total := o.Fixed.DeepCopy()
	for range vmi.Spec.Domain.VCPUs() {
		total.Add(o.PerVCPU)
	}
	if emulation {
		total.Add(o.Emulation)
	}
	return total
}
