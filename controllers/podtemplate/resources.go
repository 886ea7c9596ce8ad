package podtemplate

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// computeResources: the guest's memory plus the launcher's overhead (with huge pages: the pages,
// and memory for the overhead); CPU as the instance asks (100m when it does not); /dev/kvm from the
// node agent's device plugin unless emulating, and /dev/net/tun for Multus networks' tap devices.
func computeResources(vmi *virtv1.VirtualMachineInstance, guest resource.Quantity, cfg Config) (corev1.ResourceRequirements, error) {
	overhead := cfg.Overhead.For(vmi, cfg.UseEmulation)
	// The Pod requests requests.memory when given (below memory.guest it overcommits, as
	// KubeVirt and an instancetype's overcommitPercent do), else the guest's memory.
	mem := guest.DeepCopy()
	if req, ok := vmi.Spec.Domain.Resources.Requests[corev1.ResourceMemory]; ok {
		mem = req.DeepCopy()
	}
	hugepages, err := vmi.Spec.Domain.HugepageSize()
	if err != nil {
		return corev1.ResourceRequirements{}, err
	}
	if hugepages > 0 { // the guest's memory is huge pages, a resource of its own; memory is the overhead
		mem = resource.Quantity{}
	}
	if !vmi.Spec.Domain.Resources.OvercommitGuestOverhead || hugepages > 0 {
		mem.Add(overhead)
	}
	req := corev1.ResourceList{corev1.ResourceMemory: mem, corev1.ResourceCPU: resource.MustParse("100m")}
	if cpu, ok := vmi.Spec.Domain.Resources.Requests[corev1.ResourceCPU]; ok {
		req[corev1.ResourceCPU] = cpu
	}
	lim := corev1.ResourceList{}
	for name, q := range vmi.Spec.Domain.Resources.Limits {
		q = q.DeepCopy()
		if name == corev1.ResourceMemory {
			if err := vmi.Spec.Domain.CheckMemoryLimit(guest); err != nil {
				return corev1.ResourceRequirements{}, err
			}
			if hugepages > 0 { // the guest's memory is in huge pages, outside this limit
				q.Sub(guest)
			}
			q.Add(overhead)
		}
		lim[name] = q
	}
	if !cfg.UseEmulation {
		req[corev1.ResourceName(launcherv1.KVMResource)] = resource.MustParse("1")
		lim[corev1.ResourceName(launcherv1.KVMResource)] = resource.MustParse("1")
	}
	if hugepages > 0 { // the kubelet wants huge page limits equal to the requests
		name := corev1.ResourceName(corev1.ResourceHugePagesPrefix + vmi.Spec.Domain.Memory.Hugepages.PageSize)
		req[name], lim[name] = guest.DeepCopy(), guest.DeepCopy()
	}
	if len(MultusNetworks(vmi)) > 0 { // the launcher opens the tap the node agent bridges to Multus' interface
		req[corev1.ResourceName(launcherv1.TunResource)] = resource.MustParse("1")
		lim[corev1.ResourceName(launcherv1.TunResource)] = resource.MustParse("1")
	}
	addDeviceRequests(vmi, req, lim)
	if len(lim) == 0 {
		lim = nil
	}
	return corev1.ResourceRequirements{Requests: req, Limits: lim}, nil
}

// serviceAccountTokenSeconds is the lifetime asked for a serviceAccount disk's token: the one the
// kubelet's own automounted tokens have, which the apiserver extends (the disk is written once).
const serviceAccountTokenSeconds = 3607

// resource), so the scheduler places the Pod only where they exist and says which one is missing.
func addDeviceRequests(vmi *virtv1.VirtualMachineInstance, req, lim corev1.ResourceList) {
	var names []string
	for _, g := range vmi.Spec.Domain.Devices.GPUs {
		names = append(names, g.DeviceName)
	}
	for _, h := range vmi.Spec.Domain.Devices.HostDevices {
		names = append(names, h.DeviceName)
	}
	for _, n := range names {
		if n == "" {
			continue
		}
		q := req[corev1.ResourceName(n)]
		q.Add(resource.MustParse("1"))
		req[corev1.ResourceName(n)], lim[corev1.ResourceName(n)] = q, q.DeepCopy()
	}
}

// guaranteed: the compute container's CPU and memory limits are set and equal to its requests
// (an instance whose limits equal its requests, or that sets only limits): KubeVirt's instances of
// QoS class Guaranteed.
func guaranteed(r corev1.ResourceRequirements) bool {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		l, ok := r.Limits[name]
		if q := r.Requests[name]; !ok || l.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

// guaranteeHelper gives a helper container of a Guaranteed Pod equal CPU and memory requests and
// limits, its memory limit as before.
func guaranteeHelper(r *corev1.ResourceRequirements) {
	cpu := resource.MustParse("200m") // as KubeVirt: a containerDisk helper copies the image
	r.Requests[corev1.ResourceCPU], r.Limits[corev1.ResourceCPU] = cpu, cpu.DeepCopy()
	r.Requests[corev1.ResourceMemory] = r.Limits[corev1.ResourceMemory].DeepCopy()
}

// helperResources bounds the small helper containers.
func helperResources() corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
	addStorage(&r, nil)
	return r
}
