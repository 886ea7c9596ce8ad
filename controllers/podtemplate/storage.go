package podtemplate

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// Storage bounds the node disk a launcher Pod may use: its private emptyDir (sizeLimit) and, with
// its containers' writable layers and logs, the Pod as a whole (ephemeral-storage limits). A tenant
// cannot fill a node's disk past it (the kubelet evicts the Pod, and the guest with it), and a
// namespace's ResourceQuota on limits.ephemeral-storage counts it.
type Storage struct {
	// PerContainerDisk is what one containerDisk volume may use: the copy of its image and the
	// guest's writes over it (the overlay grows up to the image's virtual size, which the image's
	// author chooses).
	PerContainerDisk resource.Quantity
	// Fixed covers the rest of the private directory: config and cloud-init ISOs, the serial log
	// and its rotation, kernelBoot files, libvirt's files.
	Fixed resource.Quantity
}

// DefaultStorage is the default bound.
func DefaultStorage() Storage {
	return Storage{PerContainerDisk: resource.MustParse("20Gi"), Fixed: resource.MustParse("1Gi")}
}

// For is the private directory's bound for vmi: Fixed, each emptyDisk's capacity (admission bounds
// it), PerContainerDisk per containerDisk volume.
func (s Storage) For(vmi *virtv1.VirtualMachineInstance) resource.Quantity {
	total := s.Fixed.DeepCopy()
	for _, v := range vmi.Spec.Volumes {
		switch {
		case v.EmptyDisk != nil:
			total.Add(v.EmptyDisk.Capacity)
		case v.ContainerDisk != nil:
			total.Add(s.PerContainerDisk)
		}
	}
	return total
}

// Bounds of what the Pod keeps outside the private directory.
var (
	// binStorage bounds the bin emptyDir (the static container-disk helper, a few MiB).
	binStorage = resource.MustParse("64Mi")
	// layerStorage bounds each container's writable layer and logs (the kubelet rotates logs at
	// 10 MiB × 5 by default: the console log container's stdout is the guest's serial output).
	layerStorage = resource.MustParse("128Mi")
	// storageRequest is what the compute container asks the scheduler for: what a small guest uses.
	storageRequest = resource.MustParse("256Mi")
	// layerRequest is what every other container asks for.
	layerRequest = resource.MustParse("16Mi")
)

// addStorage sets the ephemeral-storage request and limit of a container: the compute container's
// limit is the private directory's bound plus its own layer; every other container's its layer.
func addStorage(r *corev1.ResourceRequirements, private *resource.Quantity) {
	if r.Requests == nil {
		r.Requests = corev1.ResourceList{}
	}
	if r.Limits == nil {
		r.Limits = corev1.ResourceList{}
	}
	limit := layerStorage.DeepCopy()
	request := layerRequest.DeepCopy()
	if private != nil {
		limit.Add(*private)
		request = storageRequest.DeepCopy()
	}
	r.Requests[corev1.ResourceEphemeralStorage] = request
	r.Limits[corev1.ResourceEphemeralStorage] = limit
}
