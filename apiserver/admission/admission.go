// Package admission is virt-api's admission webhooks for kubevirt.io: defaulting and validation of
// what the CRD schema cannot express, with errors that name the field. The same rules apply whether
// an instance comes from kubectl, a VirtualMachine's template or a replica set's template, because
// every instance is created through the API and passes here.
package admission

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/instancetype"
)

// The webhook configurations (install/virt-api/webhooks.yaml); the certificate rotator injects
// their CA bundle.
const (
	ValidatingConfiguration = "podvirt-validator"
	MutatingConfiguration   = "podvirt-mutator"
)

// Paths the webhooks are served at (install/virt-api/webhooks.yaml names them).
const (
	PathValidateVMI = "/validate-kubevirt-io-v1-virtualmachineinstance"
	PathMutateVMI   = "/mutate-kubevirt-io-v1-virtualmachineinstance"
	PathValidateVM  = "/validate-kubevirt-io-v1-virtualmachine"
	// PathValidateReplicaSet validates VirtualMachineInstanceReplicaSets' templates.
	PathValidateReplicaSet = "/validate-kubevirt-io-v1-virtualmachineinstancereplicaset"
	// PathValidateMigration validates VirtualMachineInstanceMigrations.
	PathValidateMigration = "/validate-kubevirt-io-v1-virtualmachineinstancemigration"
	// PathMutateMigration labels VirtualMachineInstanceMigrations with their instance.
	PathMutateMigration = "/mutate-kubevirt-io-v1-virtualmachineinstancemigration"
)

// Register adds the webhooks to srv; c reads the instances a migration names and the instancetypes
// and preferences a VM names, and marks an instance for evacuation when its launcher Pod is evicted;
// namespace is Podvirt's, the one whose KubeVirt object configures the cluster.
func Register(srv webhook.Server, s *runtime.Scheme, c client.Client, namespace string, policy PolicySource) {
	reader := client.Reader(c)
	srv.Register(PathEvictLauncher, &webhook.Admission{Handler: evictionInterceptor{client: c, policy: policy}})
	srv.Register(PathValidateMigration, admission.WithValidator[*virtv1.VirtualMachineInstanceMigration](s, migrationValidator{reader: reader}))
	srv.Register(PathMutateMigration, admission.WithDefaulter[*virtv1.VirtualMachineInstanceMigration](s, migrationDefaulter{}))
	srv.Register(PathValidateVMI, admission.WithValidator[*virtv1.VirtualMachineInstance](s, instanceValidator{policy: policy}))
	srv.Register(PathMutateVMI, admission.WithDefaulter[*virtv1.VirtualMachineInstance](s, instanceDefaulter{}))
	srv.Register(PathValidateVM, admission.WithValidator[*virtv1.VirtualMachine](s, vmValidator{reader: reader, policy: policy}))
	srv.Register(PathValidateReplicaSet, admission.WithValidator[*virtv1.VirtualMachineInstanceReplicaSet](s, replicaSetValidator{policy: policy}))
	srv.Register(PathValidateKubeVirt, &webhook.Admission{Handler: kubeVirtValidator{reader: reader, namespace: namespace}})
	srv.Register(PathRefuseUnsupported, &webhook.Admission{Handler: unsupportedRefuser{}})
}

// DefaultInstance fills what the API defaults on an instance: the machine type, each interface's
// model, and a CPU or memory request from its limit when only the limit is given (as Kubernetes
// defaults a container's).
func DefaultInstance(spec *virtv1.VirtualMachineInstanceSpec) {
	if spec.Domain.Machine == nil || spec.Domain.Machine.Type == "" {
		spec.Domain.Machine = &virtv1.Machine{Type: virtv1.DefaultMachineType}
	}
	res := &spec.Domain.Resources
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if l, ok := res.Limits[name]; ok && !l.IsZero() {
			if _, set := res.Requests[name]; !set {
				if res.Requests == nil {
					res.Requests = corev1.ResourceList{}
				}
				res.Requests[name] = l.DeepCopy()
			}
		}
	}
	for i := range spec.Domain.Devices.Interfaces {
		if spec.Domain.Devices.Interfaces[i].Model == "" {
			spec.Domain.Devices.Interfaces[i].Model = virtv1.DefaultInterfaceModel
		}
	}
}

// ValidateInstanceSpec checks what the schema cannot: every field Podvirt refuses (InstanceFamilies),
// the guest's memory and its limit, kernel boot sources, the bus of each disk kind, and what policy
// allows of the node (host disks, disk sizes, other namespaces' networks).
func ValidateInstanceSpec(spec *virtv1.VirtualMachineInstanceSpec, namespace string, policy Policy, fld *field.Path) field.ErrorList {
	errs := Unsupported(spec, InstanceFamilies, fld)
	errs = append(errs, spec.NameErrors(fld)...)
	errs = append(errs, spec.AccessCredentialErrors(fld.Child("accessCredentials"))...)
	if s := spec.EvictionStrategy; s != nil && *s == virtv1.EvictionStrategyExternal && !policy.ExternalEviction {
		errs = append(errs, field.Forbidden(fld.Child("evictionStrategy"), "External is refused: this cluster does not allow it (virt-api --allow-external-eviction), as a drain would wait with no bound for a controller to move the guest"))
	}
	domain := fld.Child("domain")
	if guest, err := spec.Domain.GuestMemory(); err != nil {
		errs = append(errs, field.Invalid(domain.Child("resources", "requests", "memory"), nil, err.Error()))
	} else if err := spec.Domain.CheckMemoryLimit(guest); err != nil {
		errs = append(errs, field.Invalid(domain.Child("resources", "limits", "memory"), spec.Domain.Resources.Limits.Memory().String(), err.Error()))
	} else if _, err := spec.Domain.HugepageSize(); err != nil {
		errs = append(errs, field.Invalid(domain.Child("memory", "hugepages", "pageSize"), nil, err.Error()))
	}
	if fw := spec.Domain.Firmware; fw != nil && fw.KernelBoot != nil {
		kb := domain.Child("firmware", "kernelBoot")
		switch c := fw.KernelBoot.Container; {
		case c == nil:
			errs = append(errs, field.Required(kb.Child("container"), "a container image holding the kernel is the only kernel source supported"))
		case c.KernelPath == "":
			errs = append(errs, field.Required(kb.Child("container", "kernelPath"), "required to boot a kernel"))
		}
	}
	if fw := spec.Domain.Firmware; fw != nil && fw.Bootloader != nil && fw.Bootloader.EFI != nil {
		if f := spec.Domain.Features; fw.Bootloader.EFI.SecureBootEnabled() && f != nil && f.SMM != nil && f.SMM.Enabled != nil && !*f.SMM.Enabled {
			errs = append(errs, field.Invalid(domain.Child("features", "smm", "enabled"), false, "Secure Boot (firmware.bootloader.efi.secureBoot, true by default) needs SMM"))
		}
		if fw.Bootloader.BIOS != nil {
			errs = append(errs, field.Forbidden(domain.Child("firmware", "bootloader"), "set bios or efi, not both"))
		}
	}
	if fw := spec.Domain.Firmware; fw != nil && fw.UUID != "" {
		if _, err := uuid.Parse(string(fw.UUID)); err != nil {
			errs = append(errs, field.Invalid(domain.Child("firmware", "uuid"), fw.UUID, "must be a UUID"))
		}
	}
	if a := spec.Architecture; a != "" && a != virtv1.DefaultArchitecture {
		errs = append(errs, field.Invalid(fld.Child("architecture"), a, NotSupported+": the nodes are "+virtv1.DefaultArchitecture))
	}
	errs = append(errs, validateDeviceNames(spec, domain.Child("devices"))...)
	errs = append(errs, validateHyperV(spec.Domain.Features, domain.Child("features", "hyperv"))...)
	errs = append(errs, validateVolumes(spec, namespace, policy, fld.Child("volumes"))...)
	errs = append(errs, validateBindings(spec, namespace, policy, domain.Child("devices", "interfaces"), fld.Child("networks"))...)
	errs = append(errs, validateProbe(spec, spec.ReadinessProbe, fld.Child("readinessProbe"))...)
	errs = append(errs, validateProbe(spec, spec.LivenessProbe, fld.Child("livenessProbe"))...)
	for i, d := range spec.Domain.Devices.Disks {
		if d.CDRom != nil && d.CDRom.Bus == virtv1.DiskBusVirtio {
			errs = append(errs, field.NotSupported(domain.Child("devices", "disks").Index(i).Child("cdrom", "bus"),
				d.CDRom.Bus, []virtv1.DiskBus{virtv1.DiskBusSATA, virtv1.DiskBusSCSI}))
		}
	}
	return errs
}

// validateHyperV checks what qemu needs of the Hyper-V enlightenments: synic, tlbflush and ipi need
// vpindex, synictimer needs synic; spinlock retries are at least 4096; a vendor id has 1-12 characters.
func validateHyperV(f *virtv1.Features, at *field.Path) field.ErrorList {
	if f == nil || f.Hyperv == nil {
		return nil
	}
	h := f.Hyperv
	on := func(s *virtv1.FeatureState) bool { return s != nil && (s.Enabled == nil || *s.Enabled) }
	var errs field.ErrorList
	needs := func(set bool, name string, dep *virtv1.FeatureState, depName string) {
		if set && !on(dep) {
			errs = append(errs, field.Invalid(at.Child(name), "enabled", depName+" must be enabled too"))
		}
	}
	needs(on(h.SyNIC), "synic", h.VPIndex, "vpindex")
	needs(h.TLBFlush != nil && on(&h.TLBFlush.FeatureState), "tlbflush", h.VPIndex, "vpindex")
	needs(on(h.IPI), "ipi", h.VPIndex, "vpindex")
	needs(h.SyNICTimer != nil && on(&h.SyNICTimer.FeatureState), "synictimer", h.SyNIC, "synic")
	if s := h.Spinlocks; s != nil && s.Retries != nil && *s.Retries < 4096 {
		errs = append(errs, field.Invalid(at.Child("spinlocks", "spinlocks"), *s.Retries, "must be at least 4096"))
	}
	if v := h.VendorID; v != nil && on(&v.FeatureState) && (len(v.VendorID) == 0 || len(v.VendorID) > 12) {
		errs = append(errs, field.Invalid(at.Child("vendorid", "vendorid"), v.VendorID, "must have 1 to 12 characters"))
	}
	return errs
}

// validateDeviceNames checks that each GPU's and host device's deviceName is a device plugin's
// resource name (the launcher Pod requests it).
func validateDeviceNames(spec *virtv1.VirtualMachineInstanceSpec, devices *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := func(p *field.Path, name string) {
		switch {
		case name == "":
			return // a DRA claim instead, refused by its own family
		case len(validation.IsQualifiedName(name)) > 0 || !strings.Contains(name, "/"):
			errs = append(errs, field.Invalid(p, name, "must be a device plugin's resource name, e.g. nvidia.com/GA102GL_A10"))
		case strings.HasPrefix(name, "kubernetes.io/") || strings.HasPrefix(name, launcherv1.DeviceResourcePrefix):
			errs = append(errs, field.Invalid(p, name, "is a reserved resource name"))
		}
	}
	for i, g := range spec.Domain.Devices.GPUs {
		check(devices.Child("gpus").Index(i).Child("deviceName"), g.DeviceName)
	}
	for i, h := range spec.Domain.Devices.HostDevices {
		check(devices.Child("hostDevices").Index(i).Child("deviceName"), h.DeviceName)
	}
	return errs
}

// validateBindings wants the bridge binding on Multus networks (the node agent bridges Multus'
// interface to the guest) and only there: the Pod network is user-mode networking here, which only
// the masquerade binding uses. A bridged guest is reached at its own address: no ports to forward.
// Every Multus network needs an interface, and a networkName Multus can resolve, in the instance's
// namespace unless policy allows others.
func validateBindings(spec *virtv1.VirtualMachineInstanceSpec, namespace string, policy Policy, interfaces, networks *field.Path) field.ErrorList {
	var errs field.ErrorList
	multus := map[string]bool{}
	for _, n := range spec.Networks {
		multus[n.Name] = n.Multus != nil
	}
	named := map[string]bool{}
	for i, iface := range spec.Domain.Devices.Interfaces {
		named[iface.Name] = true
		switch {
		case iface.Bridge != nil && !multus[iface.Name]:
			errs = append(errs, field.Forbidden(interfaces.Index(i).Child("bridge"), NotSupported+": the Pod network is user-mode here; use masquerade"))
		case multus[iface.Name] && iface.Bridge == nil:
			errs = append(errs, field.Required(interfaces.Index(i).Child("bridge"), "a Multus network is joined with the bridge binding in Podvirt"))
		case multus[iface.Name] && len(iface.Ports) > 0:
			errs = append(errs, field.Forbidden(interfaces.Index(i).Child("ports"), "a bridged guest is reached at its own address: nothing is forwarded"))
		}
	}
	for i, n := range spec.Networks {
		if n.Pod != nil {
			if _, _, err := n.Pod.GuestCIDRs(); err != nil {
				errs = append(errs, field.Invalid(networks.Index(i).Child("pod"), n.Pod, err.Error()))
			}
		}
		if n.Multus == nil {
			continue
		}
		if !named[n.Name] {
			errs = append(errs, field.Required(interfaces, fmt.Sprintf("an interface named %q for the Multus network spec.networks[%d]", n.Name, i)))
		}
		ns, _, ok := n.Multus.Attachment(namespace)
		switch {
		case !ok:
			errs = append(errs, field.Invalid(networks.Index(i).Child("multus", "networkName"), n.Multus.NetworkName, "NAME or NAMESPACE/NAME of a NetworkAttachmentDefinition"))
		case ns != namespace && !policy.CrossNamespaceNetworks:
			errs = append(errs, field.Forbidden(networks.Index(i).Child("multus", "networkName"), "a network of another namespace ("+ns+") is refused: this cluster does not allow them (virt-api --allow-cross-namespace-networks)"))
		}
	}
	return errs
}

// validateProbe wants a handler (httpGet; the others are refused by their family) whose port is a
// number, and a pod network interface: the launcher forwards the port to the guest, and there is no
// container port a name could resolve to.
func validateProbe(spec *virtv1.VirtualMachineInstanceSpec, p *virtv1.Probe, at *field.Path) field.ErrorList {
	switch {
	case p == nil || p.Exec != nil || p.GuestAgentPing != nil || p.TCPSocket != nil:
		return nil
	case p.HTTPGet == nil:
		return field.ErrorList{field.Required(at.Child("httpGet"), "the probe's handler")}
	}
	if port := p.HTTPGet.Port; port.Type != intstr.Int || port.IntVal < 1 || port.IntVal > 65535 {
		return field.ErrorList{field.Invalid(at.Child("httpGet", "port"), port.String(), "must be a port number, 1-65535 (the guest port the probe reaches)")}
	}
	if !spec.HasPodInterface() {
		return field.ErrorList{field.Invalid(at.Child("httpGet"), nil, "the probe reaches the guest through its pod network interface, which this instance has not")}
	}
	return nil
}

// validateVolumes keeps config disk labels to an ISO volume id's length, allows one serviceAccount
// volume, and keeps every hostDisk image under its namespace's directory of launcherv1.HostDiskRoot
// on the node (the only place the node agent creates files and hands them to the launcher) and
// sized when created. Host disks need the HostDisk feature gate; a disk the node creates is at most
// policy's capacity.
func validateVolumes(spec *virtv1.VirtualMachineInstanceSpec, namespace string, policy Policy, volumes *field.Path) field.ErrorList {
	var errs field.ErrorList
	accounts := 0
	maxCap := policy.maxDiskCapacity()
	bounded := func(p *field.Path, c resource.Quantity) {
		if c.Cmp(maxCap) > 0 {
			errs = append(errs, field.Invalid(p, c.String(), "more than "+maxCap.String()+", the largest disk this cluster creates on a node (virt-api --max-disk-capacity)"))
		}
	}
	for i, v := range spec.Volumes {
		var kind, label string
		switch {
		case v.ConfigMap != nil:
			kind, label = "configMap", v.ConfigMap.VolumeLabel
		case v.Secret != nil:
			kind, label = "secret", v.Secret.VolumeLabel
		case v.DownwardAPI != nil:
			kind, label = "downwardAPI", v.DownwardAPI.VolumeLabel
		}
		if len(label) > isoVolumeIDMax {
			errs = append(errs, field.TooLong(volumes.Index(i).Child(kind, "volumeLabel"), label, isoVolumeIDMax))
		}
		if v.ServiceAccount != nil {
			if accounts++; accounts > 1 {
				errs = append(errs, field.Forbidden(volumes.Index(i).Child("serviceAccount"), "an instance may have one serviceAccount volume (its launcher Pod runs as that ServiceAccount)"))
			}
		}
		if v.EmptyDisk != nil {
			bounded(volumes.Index(i).Child("emptyDisk", "capacity"), v.EmptyDisk.Capacity)
		}
		hd := v.HostDisk
		if hd == nil {
			continue
		}
		p := volumes.Index(i).Child("hostDisk")
		if !policy.HostDisk {
			errs = append(errs, field.Forbidden(p, "host disks are off in this cluster: an administrator enables them with virt-api --feature-gates="+FeatureHostDisk))
			continue
		}
		bounded(p.Child("capacity"), hd.Capacity)
		if !launcherv1.InHostDiskDir(namespace, hd.Path) {
			errs = append(errs, field.Invalid(p.Child("path"), hd.Path, "must be a clean absolute path under "+launcherv1.HostDiskDir(namespace)+" (the node directory Podvirt keeps this namespace's host disks in)"))
		}
		if hd.Type == virtv1.HostDiskExistsOrCreate && hd.Capacity.Sign() <= 0 {
			errs = append(errs, field.Required(p.Child("capacity"), "DiskOrCreate needs the size of the image to create"))
		}
	}
	return errs
}

// isoVolumeIDMax is the length of an ISO 9660 volume identifier, which a config disk's volumeLabel
// becomes.
const isoVolumeIDMax = 32

// ValidateInstanceUpdate refuses changes to a created instance's spec: an instance runs what it was
// created with (a VirtualMachine's template changes reach the next instance). The termination grace
// period may change (a stop with --grace-period sets it first).
func ValidateInstanceUpdate(old, updated *virtv1.VirtualMachineInstanceSpec) field.ErrorList {
	o, u := old.DeepCopy(), updated.DeepCopy()
	o.TerminationGracePeriodSeconds, u.TerminationGracePeriodSeconds = nil, nil
	if reflect.DeepEqual(o, u) {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("spec"), "the spec of a VirtualMachineInstance cannot change once created (except terminationGracePeriodSeconds); change the VirtualMachine's template and restart it")}
}

func invalid(kind string, obj interface{ GetName() string }, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(virtv1.SchemeGroupVersion.WithKind(kind).GroupKind(), obj.GetName(), errs)
}

type instanceValidator struct{ policy PolicySource }

func (v instanceValidator) ValidateCreate(ctx context.Context, vmi *virtv1.VirtualMachineInstance) (admission.Warnings, error) {
	policy, err := v.policy.get(ctx)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	errs := UnsupportedAnnotations(vmi.Annotations, field.NewPath("metadata", "annotations"))
	return nil, invalid("VirtualMachineInstance", vmi, append(errs, ValidateInstanceSpec(&vmi.Spec, vmi.Namespace, policy, field.NewPath("spec"))...))
}

func (instanceValidator) ValidateUpdate(_ context.Context, old, vmi *virtv1.VirtualMachineInstance) (admission.Warnings, error) {
	return nil, invalid("VirtualMachineInstance", vmi, ValidateInstanceUpdate(&old.Spec, &vmi.Spec))
}

func (instanceValidator) ValidateDelete(context.Context, *virtv1.VirtualMachineInstance) (admission.Warnings, error) {
	return nil, nil
}

type instanceDefaulter struct{}

func (instanceDefaulter) Default(_ context.Context, vmi *virtv1.VirtualMachineInstance) error {
	DefaultInstance(&vmi.Spec)
	return nil
}

// RunningDeprecated is the warning for a VirtualMachine that uses spec.running.
const RunningDeprecated = "spec.running is deprecated; use spec.runStrategy (Always or Halted)"

type vmValidator struct {
	reader client.Reader
	policy PolicySource
}

// validate checks vm; checkTemplate is false for an update that leaves the template, instancetype
// and preference as they were (a start, stop or label change of a VM whose instancetype has since
// changed or gone must still go through).
func (v vmValidator) validate(ctx context.Context, vm *virtv1.VirtualMachine, checkTemplate bool) (admission.Warnings, error) {
	var warnings admission.Warnings
	if vm.Spec.Running != nil {
		warnings = append(warnings, RunningDeprecated)
	}
	errs := Unsupported(&vm.Spec, VMFamilies, field.NewPath("spec"))
	if vm.Spec.Template != nil && checkTemplate {
		errs = append(errs, UnsupportedAnnotations(vm.Spec.Template.ObjectMeta.Annotations, field.NewPath("spec", "template", "metadata", "annotations"))...)
		more, err := v.validateTemplate(ctx, vm)
		if err != nil {
			return warnings, err
		}
		errs = append(errs, more...)
	}
	return warnings, invalid("VirtualMachine", vm, errs)
}

// validateTemplate checks the instance the VM's template gives once expanded with the instancetype
// and preference it names, as the controller will create it.
func (v vmValidator) validateTemplate(ctx context.Context, vm *virtv1.VirtualMachine) (field.ErrorList, error) {
	at := field.NewPath("spec", "template", "spec")
	spec := vm.Spec.Template.Spec.DeepCopy()
	policy, err := v.policy.get(ctx)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if vm.Spec.Instancetype == nil && vm.Spec.Preference == nil {
		return ValidateInstanceSpec(spec, vm.Namespace, policy, at), nil
	}
	specs, err := instancetype.Live(ctx, v.reader, vm)
	if fe := (*field.Error)(nil); errors.As(err, &fe) {
		return field.ErrorList{fe}, nil
	} else if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	errs := instancetype.Conflicts(specs.Instancetype, spec, at)
	if e := instancetype.SpreadError(specs, field.NewPath("spec", "instancetype")); e != nil {
		errs = append(errs, e)
	}
	if len(errs) > 0 {
		return errs, nil
	}
	annotations := maps.Clone(vm.Spec.Template.ObjectMeta.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	instancetype.Apply(specs, spec, annotations)
	errs = append(instancetype.Requirements(specs.Preference, spec, at), ValidateInstanceSpec(spec, vm.Namespace, policy, at)...)
	errs = append(errs, UnsupportedAnnotations(annotations, field.NewPath("spec", "template", "metadata", "annotations"))...)
	for _, e := range errs {
		e.Detail += " (the template with " + instancetype.Describe(vm) + ")"
	}
	return errs, nil
}

func (v vmValidator) ValidateCreate(ctx context.Context, vm *virtv1.VirtualMachine) (admission.Warnings, error) {
	return v.validate(ctx, vm, true)
}

func (v vmValidator) ValidateUpdate(ctx context.Context, old, vm *virtv1.VirtualMachine) (admission.Warnings, error) {
	changed := vm.DeletionTimestamp == nil && (!reflect.DeepEqual(old.Spec.Template, vm.Spec.Template) ||
		!reflect.DeepEqual(old.Spec.Instancetype, vm.Spec.Instancetype) || !reflect.DeepEqual(old.Spec.Preference, vm.Spec.Preference))
	return v.validate(ctx, vm, changed)
}

func (vmValidator) ValidateDelete(context.Context, *virtv1.VirtualMachine) (admission.Warnings, error) {
	return nil, nil
}

type replicaSetValidator struct{ policy PolicySource }

func (v replicaSetValidator) validate(ctx context.Context, rs *virtv1.VirtualMachineInstanceReplicaSet) (admission.Warnings, error) {
	var errs field.ErrorList
	if rs.Spec.Template != nil {
		policy, err := v.policy.get(ctx)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		errs = append(UnsupportedAnnotations(rs.Spec.Template.ObjectMeta.Annotations, field.NewPath("spec", "template", "metadata", "annotations")),
			ValidateInstanceSpec(&rs.Spec.Template.Spec, rs.Namespace, policy, field.NewPath("spec", "template", "spec"))...)
	}
	return nil, invalid("VirtualMachineInstanceReplicaSet", rs, errs)
}

func (v replicaSetValidator) ValidateCreate(ctx context.Context, rs *virtv1.VirtualMachineInstanceReplicaSet) (admission.Warnings, error) {
	return v.validate(ctx, rs)
}

func (v replicaSetValidator) ValidateUpdate(ctx context.Context, _, rs *virtv1.VirtualMachineInstanceReplicaSet) (admission.Warnings, error) {
	return v.validate(ctx, rs)
}

func (replicaSetValidator) ValidateDelete(context.Context, *virtv1.VirtualMachineInstanceReplicaSet) (admission.Warnings, error) {
	return nil, nil
}
