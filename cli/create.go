package cli

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	itv1beta1 "github.com/podvirt/podvirt/api/instancetype/v1beta1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/scheme"
)

// CreateVMOptions is `create vm`: a VirtualMachine manifest printed for `kubectl apply -f -`
// (nothing is sent to the cluster), with KubeVirt's virtctl flags.
type CreateVMOptions struct {
	genericiooptions.IOStreams
	print *genericclioptions.PrintFlags

	Name             string
	RunStrategy      string
	Memory           string
	ContainerDisks   []string
	PVCs             []string
	UserDataBase64   string
	UserDataFile     string
	SSHKeys          []string
	GracePeriod      int64
	Instancetype     string
	Preference       string
	memory           resource.Quantity
	instancetype     *virtv1.InstancetypeMatcher
	preference       *virtv1.PreferenceMatcher
	userData         string
	userDataIsBase64 bool
}

func newCreateCommand(_ *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	create := &cobra.Command{Use: "create", Short: "Print manifests of new objects (create vm)"}
	o := &CreateVMOptions{IOStreams: streams, print: genericclioptions.NewPrintFlags("").WithTypeSetter(scheme.New()).WithDefaultOutput("yaml")}
	vm := &cobra.Command{
		Use:   "vm",
		Short: "Print a VirtualMachine manifest (apply it with kubectl apply -f -)",
		Example: "  virtctl create vm --name my-vm --volume-containerdisk src:quay.io/containerdisks/fedora:latest \\\n" +
			"    --cloud-init-user-data-file user-data.yaml | kubectl apply -f -",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(cmd); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f := vm.Flags()
	f.StringVar(&o.Name, "name", "", "Name of the VM (default: vm-<random>)")
	f.StringVar(&o.RunStrategy, "run-strategy", string(virtv1.RunStrategyAlways), "Always, Halted, Manual, RerunOnFailure or Once")
	f.StringVar(&o.Memory, "memory", "512Mi", "Guest memory")
	f.StringArrayVar(&o.ContainerDisks, "volume-containerdisk", nil, "A containerDisk volume: src:IMAGE[,name:NAME] (repeatable; the first boots)")
	f.StringArrayVar(&o.PVCs, "volume-pvc", nil, "A PersistentVolumeClaim volume: src:CLAIM[,name:NAME] (repeatable)")
	f.StringVar(&o.UserDataBase64, "cloud-init-user-data", "", "cloud-init user data, base64-encoded (as KubeVirt's virtctl)")
	f.StringVar(&o.UserDataFile, "cloud-init-user-data-file", "", "cloud-init user data from a file")
	f.StringArrayVar(&o.SSHKeys, "ssh-key", nil, "An SSH public key for the guest's default user, via cloud-init (repeatable)")
	f.Int64Var(&o.GracePeriod, "termination-grace-period", virtv1.DefaultGracePeriodSeconds, "Seconds the guest gets to shut down")
	f.StringVar(&o.Instancetype, "instancetype", "", "Size the VM from an instancetype: NAME (cluster-wide) or virtualmachineinstancetype/NAME (the VM's namespace); not with --memory")
	f.StringVar(&o.Preference, "preference", "", "Fill in the VM's defaults from a preference: NAME (cluster-wide) or virtualmachinepreference/NAME (the VM's namespace)")
	o.print.AddFlags(vm)
	create.AddCommand(vm)
	return create
}

// Validate checks every flag and reads the user data file.
func (o *CreateVMOptions) Validate(cmd *cobra.Command) error {
	switch virtv1.VirtualMachineRunStrategy(o.RunStrategy) {
	case virtv1.RunStrategyAlways, virtv1.RunStrategyHalted, virtv1.RunStrategyManual, virtv1.RunStrategyRerunOnFailure, virtv1.RunStrategyOnce:
	default:
		return usageError(cmd, "--run-strategy: %q is not Always, Halted, Manual, RerunOnFailure or Once", o.RunStrategy)
	}
	q, err := resource.ParseQuantity(o.Memory)
	if err != nil || q.Sign() <= 0 {
		return usageError(cmd, "--memory: %q is not a positive quantity (e.g. 512Mi)", o.Memory)
	}
	o.memory = q
	if o.Instancetype != "" {
		if cmd.Flags().Changed("memory") {
			return usageError(cmd, "--memory cannot be used with --instancetype: the instancetype sets the guest's memory")
		}
		kind, name, err := parseMatcher("--instancetype", o.Instancetype, instancetypeKinds)
		if err != nil {
			return usageError(cmd, "%v", err)
		}
		o.instancetype = &virtv1.InstancetypeMatcher{Kind: kind, Name: name}
	}
	if o.Preference != "" {
		kind, name, err := parseMatcher("--preference", o.Preference, preferenceKinds)
		if err != nil {
			return usageError(cmd, "%v", err)
		}
		o.preference = &virtv1.PreferenceMatcher{Kind: kind, Name: name}
	}
	if o.GracePeriod < 0 || o.GracePeriod > virtv1.MaxGracePeriodSeconds {
		return usageError(cmd, "--termination-grace-period must be between 0 and %d seconds, got %d", virtv1.MaxGracePeriodSeconds, o.GracePeriod)
	}
	given := 0
	for _, s := range []string{o.UserDataBase64, o.UserDataFile} {
		if s != "" {
			given++
		}
	}
	switch {
	case given > 1:
		return usageError(cmd, "give --cloud-init-user-data or --cloud-init-user-data-file, not both")
	case given > 0 && len(o.SSHKeys) > 0:
		return usageError(cmd, "--ssh-key writes the user data itself; put the keys in your own user data instead")
	case o.UserDataBase64 != "":
		if _, err := base64.StdEncoding.DecodeString(o.UserDataBase64); err != nil {
			return usageError(cmd, "--cloud-init-user-data must be base64 (use --cloud-init-user-data-file for plain text): %v", err)
		}
		o.userData, o.userDataIsBase64 = o.UserDataBase64, true
	case o.UserDataFile != "":
		data, err := os.ReadFile(o.UserDataFile)
		if err != nil {
			return usageError(cmd, "--cloud-init-user-data-file: %v", err)
		}
		o.userData = string(data)
	case len(o.SSHKeys) > 0:
		o.userData = "#cloud-config\nssh_authorized_keys:\n"
		for _, k := range o.SSHKeys {
			o.userData += "  - " + strings.TrimSpace(k) + "\n"
		}
	}
	for _, v := range append(append([]string{}, o.ContainerDisks...), o.PVCs...) {
		if _, _, err := parseVolumeFlag(v); err != nil {
			return usageError(cmd, "%v", err)
		}
	}
	return nil
}

// The kinds --instancetype and --preference accept before a slash, by the names kubectl knows them
// by (resource, singular, short names), lower case.
var (
	instancetypeKinds = map[string]string{
		"virtualmachineinstancetype": itv1beta1.KindInstancetype, "virtualmachineinstancetypes": itv1beta1.KindInstancetype,
		"vminstancetype": itv1beta1.KindInstancetype, "vmf": itv1beta1.KindInstancetype,
		"virtualmachineclusterinstancetype": itv1beta1.KindClusterInstancetype, "virtualmachineclusterinstancetypes": itv1beta1.KindClusterInstancetype,
		"vmclusterinstancetype": itv1beta1.KindClusterInstancetype, "vmcf": itv1beta1.KindClusterInstancetype,
	}
	preferenceKinds = map[string]string{
		"virtualmachinepreference": itv1beta1.KindPreference, "virtualmachinepreferences": itv1beta1.KindPreference,
		"vmpref": itv1beta1.KindPreference, "vmp": itv1beta1.KindPreference,
		"virtualmachineclusterpreference": itv1beta1.KindClusterPreference, "virtualmachineclusterpreferences": itv1beta1.KindClusterPreference,
		"vmcp": itv1beta1.KindClusterPreference,
	}
)

// parseMatcher reads [KIND/]NAME; without a kind the cluster-wide kind is meant and left implicit.
func parseMatcher(flag, v string, kinds map[string]string) (kind, name string, err error) {
	k, n, hasKind := strings.Cut(v, "/")
	if !hasKind {
		k, n = "", v
	}
	if hasKind {
		var ok bool
		if kind, ok = kinds[strings.ToLower(k)]; !ok {
			return "", "", fmt.Errorf("%s: unknown kind %q in %q", flag, k, v)
		}
	}
	if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
		return "", "", fmt.Errorf("%s: %q is not a valid name: %s", flag, n, strings.Join(errs, "; "))
	}
	return kind, n, nil
}

// parseVolumeFlag reads src:SOURCE[,name:NAME].
func parseVolumeFlag(v string) (src, name string, err error) {
	for _, part := range strings.Split(v, ",") {
		key, value, ok := strings.Cut(part, ":")
		switch {
		case !ok || value == "":
			return "", "", fmt.Errorf("volume %q: want src:SOURCE[,name:NAME]", v)
		case key == "src":
			src = value
		case key == "name":
			name = value
		default:
			return "", "", fmt.Errorf("volume %q: unknown key %q (src, name)", v, key)
		}
	}
	if src == "" {
		return "", "", fmt.Errorf("volume %q: src is required", v)
	}
	return src, name, nil
}

// Run prints the manifest.
func (o *CreateVMOptions) Run(context.Context) error {
	name := o.Name
	if name == "" {
		name = "vm-" + utilrand.String(5)
	}
	strategy := virtv1.VirtualMachineRunStrategy(o.RunStrategy)
	grace := o.GracePeriod
	spec := virtv1.VirtualMachineInstanceSpec{
		TerminationGracePeriodSeconds: &grace,
	}
	if o.instancetype == nil {
		spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: o.memory}
	}
	add := func(kind string, i int, flag string, source virtv1.VolumeSource) {
		src, volName, _ := parseVolumeFlag(flag)
		if volName == "" {
			volName = fmt.Sprintf("%s-%s-%d", name, kind, i)
		}
		if source.ContainerDisk != nil {
			source.ContainerDisk.Image = src
		} else {
			source.PersistentVolumeClaim.ClaimName = src
		}
		spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, virtv1.Disk{Name: volName, Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}})
		spec.Volumes = append(spec.Volumes, virtv1.Volume{Name: volName, VolumeSource: source})
	}
	for i, v := range o.ContainerDisks {
		add("containerdisk", i, v, virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{}})
	}
	for i, v := range o.PVCs {
		add("pvc", i, v, virtv1.VolumeSource{PersistentVolumeClaim: &virtv1.PersistentVolumeClaimVolumeSource{}})
	}
	if o.userData != "" {
		ci := &virtv1.CloudInitNoCloudSource{UserData: o.userData}
		if o.userDataIsBase64 {
			ci = &virtv1.CloudInitNoCloudSource{UserDataBase64: o.userData}
		}
		spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, virtv1.Disk{Name: "cloudinitdisk", Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}})
		spec.Volumes = append(spec.Volumes, virtv1.Volume{Name: "cloudinitdisk", VolumeSource: virtv1.VolumeSource{CloudInitNoCloud: ci}})
	}
	vm := &virtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: virtv1.VirtualMachineSpec{
			RunStrategy:  &strategy,
			Instancetype: o.instancetype,
			Preference:   o.preference,
			Template:     &virtv1.VirtualMachineInstanceTemplateSpec{Spec: spec},
		},
	}
	printer, err := o.print.ToPrinter()
	if err != nil {
		return err
	}
	return printer.PrintObj(vm, o.Out)
}
