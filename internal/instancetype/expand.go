// Package instancetype applies the instancetype and preference a VirtualMachine names
// (instancetype.kubevirt.io) to its template, as KubeVirt does: the instancetype fixes the guest's
// CPU count, memory and the devices it lists, and a template that sets what the instancetype fixes
// is a conflict; a preference fills what the template leaves unset. The VM controller applies the
// revisions it pinned (revision.go) when it creates an instance; virt-api's admission applies the
// live objects to check a VM before it is stored.
package instancetype

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	itv1beta1 "github.com/podvirt/podvirt/api/instancetype/v1beta1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// Specs are the instancetype and preference a VM uses; nil when it names none.
type Specs struct {
	Instancetype *itv1beta1.VirtualMachineInstancetypeSpec
	Preference   *itv1beta1.VirtualMachinePreferenceSpec
}

// Conflicts names every field of spec the instancetype fixes (KubeVirt refuses such a VM); at is
// spec's path.
func Conflicts(it *itv1beta1.VirtualMachineInstancetypeSpec, spec *virtv1.VirtualMachineInstanceSpec, at *field.Path) field.ErrorList {
	if it == nil {
		return nil
	}
	var errs field.ErrorList
	conflict := func(set bool, p *field.Path) {
		if set {
			errs = append(errs, field.Forbidden(p, "must not be set: the VM's instancetype sets it"))
		}
	}
	d, domain := &spec.Domain, at.Child("domain")
	if cpu := d.CPU; cpu != nil {
		p := domain.Child("cpu")
		conflict(cpu.Sockets != 0, p.Child("sockets"))
		conflict(cpu.Cores != 0, p.Child("cores"))
		conflict(cpu.Threads != 0, p.Child("threads"))
		conflict(it.CPU.Model != nil && cpu.Model != "", p.Child("model"))
		conflict(it.CPU.DedicatedCPUPlacement != nil && cpu.DedicatedCPUPlacement, p.Child("dedicatedCpuPlacement"))
		conflict(it.CPU.NUMA != nil && cpu.NUMA != nil, p.Child("numa"))
		conflict(it.CPU.IsolateEmulatorThread != nil && cpu.IsolateEmulatorThread, p.Child("isolateEmulatorThread"))
		conflict(it.CPU.Realtime != nil && cpu.Realtime != nil, p.Child("realtime"))
		conflict(it.CPU.MaxSockets != nil && cpu.MaxSockets != 0, p.Child("maxSockets"))
	}
	_, cpuReq := d.Resources.Requests[corev1.ResourceCPU]
	_, cpuLim := d.Resources.Limits[corev1.ResourceCPU]
	conflict(cpuReq, domain.Child("resources", "requests", "cpu"))
	conflict(cpuLim, domain.Child("resources", "limits", "cpu"))
	if m := d.Memory; m != nil {
		conflict(m.Guest != nil, domain.Child("memory", "guest"))
		conflict(it.Memory.Hugepages != nil && m.Hugepages != nil, domain.Child("memory", "hugepages"))
		conflict(it.Memory.MaxGuest != nil && m.MaxGuest != nil, domain.Child("memory", "maxGuest"))
	}
	_, memReq := d.Resources.Requests[corev1.ResourceMemory]
	_, memLim := d.Resources.Limits[corev1.ResourceMemory]
	conflict(memReq, domain.Child("resources", "requests", "memory"))
	conflict(memLim, domain.Child("resources", "limits", "memory"))
	conflict(len(it.GPUs) > 0 && len(d.Devices.GPUs) > 0, domain.Child("devices", "gpus"))
	conflict(len(it.HostDevices) > 0 && len(d.Devices.HostDevices) > 0, domain.Child("devices", "hostDevices"))
	conflict(it.IOThreadsPolicy != nil && d.IOThreadsPolicy != nil, domain.Child("ioThreadsPolicy"))
	conflict(it.IOThreads != nil && d.IOThreads != nil, domain.Child("ioThreads"))
	conflict(it.LaunchSecurity != nil && d.LaunchSecurity != nil, domain.Child("launchSecurity"))
	conflict(len(it.NodeSelector) > 0 && len(spec.NodeSelector) > 0, at.Child("nodeSelector"))
	conflict(it.SchedulerName != "" && spec.SchedulerName != "", at.Child("schedulerName"))
	return errs
}

// Apply expands spec and annotations (an instance's) with s: the instancetype first, then the
// preference. Call Conflicts first: Apply overwrites what the instancetype fixes.
func Apply(s Specs, spec *virtv1.VirtualMachineInstanceSpec, annotations map[string]string) {
	if s.Instancetype != nil {
		applyInstancetype(s.Instancetype, s.Preference, spec, annotations)
	}
	if s.Preference != nil {
		applyPreference(s.Preference, spec, annotations)
	}
}

func applyInstancetype(it *itv1beta1.VirtualMachineInstancetypeSpec, pref *itv1beta1.VirtualMachinePreferenceSpec, spec *virtv1.VirtualMachineInstanceSpec, annotations map[string]string) {
	d := &spec.Domain
	if d.CPU == nil {
		d.CPU = &virtv1.CPU{}
	}
	cpu := d.CPU
	cpu.Sockets, cpu.Cores, cpu.Threads = topology(it.CPU.Guest, pref)
	if it.CPU.Model != nil {
		cpu.Model = *it.CPU.Model
	}
	if it.CPU.DedicatedCPUPlacement != nil {
		cpu.DedicatedCPUPlacement = *it.CPU.DedicatedCPUPlacement
	}
	if it.CPU.NUMA != nil {
		cpu.NUMA = it.CPU.NUMA.DeepCopy()
	}
	if it.CPU.IsolateEmulatorThread != nil {
		cpu.IsolateEmulatorThread = *it.CPU.IsolateEmulatorThread
	}
	if it.CPU.Realtime != nil {
		cpu.Realtime = it.CPU.Realtime.DeepCopy()
	}
	if it.CPU.MaxSockets != nil {
		cpu.MaxSockets = *it.CPU.MaxSockets
	}

	if d.Memory == nil {
		d.Memory = &virtv1.Memory{}
	}
	guest := it.Memory.Guest.DeepCopy()
	d.Memory.Guest = &guest
	if it.Memory.Hugepages != nil {
		d.Memory.Hugepages = it.Memory.Hugepages.DeepCopy()
	}
	if it.Memory.MaxGuest != nil {
		d.Memory.MaxGuest = ptrQuantity(*it.Memory.MaxGuest)
	}
	if p := it.Memory.OvercommitPercent; p > 0 {
		// The launcher Pod requests less than the guest may use: guest × (100 − p) %.
		req := resource.NewQuantity(guest.Value()*int64(100-p)/100, guest.Format)
		if d.Resources.Requests == nil {
			d.Resources.Requests = corev1.ResourceList{}
		}
		d.Resources.Requests[corev1.ResourceMemory] = *req
	}

	for i := range it.GPUs {
		d.Devices.GPUs = append(d.Devices.GPUs, *it.GPUs[i].DeepCopy())
	}
	for i := range it.HostDevices {
		d.Devices.HostDevices = append(d.Devices.HostDevices, *it.HostDevices[i].DeepCopy())
	}
	if it.IOThreadsPolicy != nil {
		d.IOThreadsPolicy = ptr.To(*it.IOThreadsPolicy)
	}
	if it.IOThreads != nil {
		d.IOThreads = it.IOThreads.DeepCopy()
	}
	if it.LaunchSecurity != nil {
		d.LaunchSecurity = it.LaunchSecurity.DeepCopy()
	}
	if len(it.NodeSelector) > 0 {
		spec.NodeSelector = maps.Clone(it.NodeSelector)
	}
	if it.SchedulerName != "" {
		spec.SchedulerName = it.SchedulerName
	}
	addMissing(annotations, it.Annotations)
}

// topology spreads the instancetype's guest vCPUs over sockets, cores and threads as the
// preference says: sockets by default; spread uses spreadOptions (across, ratio; the deprecated
// preferSpreadSocketToCoreRatio) when the count divides evenly (SpreadError says when it does not).
func topology(guest uint32, pref *itv1beta1.VirtualMachinePreferenceSpec) (sockets, cores, threads uint32) {
	switch preferredTopology(pref) {
	case itv1beta1.Cores, itv1beta1.DeprecatedPreferCores:
		return 1, guest, 1
	case itv1beta1.Threads, itv1beta1.DeprecatedPreferThreads:
		return 1, 1, guest
	case itv1beta1.Spread, itv1beta1.DeprecatedPreferSpread:
		across, ratio := spreadOptions(pref)
		switch {
		case guest%ratio != 0:
		case across == itv1beta1.SpreadAcrossCoresThreads:
			return 1, guest / ratio, ratio
		case across == itv1beta1.SpreadAcrossSocketsCoresThreads && guest%(2*ratio) == 0:
			return guest / (2 * ratio), ratio, 2
		case across == itv1beta1.SpreadAcrossSocketsCores:
			return guest / ratio, ratio, 1
		}
	}
	return guest, 1, 1
}

func preferredTopology(pref *itv1beta1.VirtualMachinePreferenceSpec) itv1beta1.PreferredCPUTopology {
	if pref == nil || pref.CPU == nil || pref.CPU.PreferredCPUTopology == nil {
		return itv1beta1.Sockets
	}
	return *pref.CPU.PreferredCPUTopology
}

// spreadOptions are the preference's spread settings with KubeVirt's defaults (SocketsCores, 2).
func spreadOptions(pref *itv1beta1.VirtualMachinePreferenceSpec) (itv1beta1.SpreadAcross, uint32) {
	across, ratio := itv1beta1.SpreadAcrossSocketsCores, uint32(2)
	if pref.PreferSpreadSocketToCoreRatio != 0 {
		ratio = pref.PreferSpreadSocketToCoreRatio
	}
	if pref.CPU == nil || pref.CPU.SpreadOptions == nil {
		return across, ratio
	}
	if o := pref.CPU.SpreadOptions; o != nil {
		if o.Across != nil {
			across = *o.Across
		}
		if o.Ratio != nil && *o.Ratio != 0 {
			ratio = *o.Ratio
		}
	}
	return across, ratio
}

// SpreadError says when the instancetype's vCPUs cannot be spread as the preference asks.
func SpreadError(s Specs, at *field.Path) *field.Error {
	if s.Instancetype == nil || s.Preference == nil {
		return nil
	}
	switch preferredTopology(s.Preference) {
	case itv1beta1.Spread, itv1beta1.DeprecatedPreferSpread:
	default:
		return nil
	}
	across, ratio := spreadOptions(s.Preference)
	n := ratio
	if across == itv1beta1.SpreadAcrossSocketsCoresThreads {
		n = 2 * ratio
	}
	if s.Instancetype.CPU.Guest%n == 0 {
		return nil
	}
	return field.Invalid(at, s.Instancetype.CPU.Guest, fmt.Sprintf("the instancetype's vCPUs cannot be spread across %s with ratio %d", across, ratio))
}

func addMissing(dst, src map[string]string) {
	for k, v := range src {
		if _, ok := dst[k]; !ok {
			dst[k] = v
		}
	}
}

func ptrQuantity(q resource.Quantity) *resource.Quantity {
	c := q.DeepCopy()
	return &c
}

// Describe names the instancetype and preference a VM uses, for messages.
func Describe(vm *virtv1.VirtualMachine) string {
	switch it, pref := vm.Spec.Instancetype, vm.Spec.Preference; {
	case it != nil && pref != nil:
		return fmt.Sprintf("instancetype %s and preference %s", it.Name, pref.Name)
	case it != nil:
		return "instancetype " + it.Name
	case pref != nil:
		return "preference " + pref.Name
	}
	return ""
}

// ExpandVM is vm as KubeVirt's expand-spec answers it: its template with the instancetype and
// preference it names (Live: pinned revisions first) applied, and neither named any more. A VM
// naming none comes back as it is. Conflicts, a missing instancetype or preference and a spread the
// instancetype cannot give are field errors (an aggregate).
func ExpandVM(ctx context.Context, c client.Reader, vm *virtv1.VirtualMachine) (*virtv1.VirtualMachine, error) {
	out := vm.DeepCopy()
	if out.Spec.Instancetype == nil && out.Spec.Preference == nil {
		return out, nil
	}
	if out.Spec.Template == nil {
		return nil, field.Required(field.NewPath("spec", "template"), "a VM to expand needs a template")
	}
	specs, err := Live(ctx, c, out)
	if err != nil {
		return nil, err
	}
	at := field.NewPath("spec", "template", "spec")
	errs := Conflicts(specs.Instancetype, &out.Spec.Template.Spec, at)
	if e := SpreadError(specs, field.NewPath("spec", "instancetype")); e != nil {
		errs = append(errs, e)
	}
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	if out.Spec.Template.ObjectMeta.Annotations == nil {
		out.Spec.Template.ObjectMeta.Annotations = map[string]string{}
	}
	Apply(specs, &out.Spec.Template.Spec, out.Spec.Template.ObjectMeta.Annotations)
	out.Spec.Instancetype, out.Spec.Preference = nil, nil
	return out, nil
}
