package domainxml_test

import (
	"encoding/xml"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"libvirt.org/go/libvirtxml"
	"sigs.k8s.io/yaml"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/nodeagent/launcher/domainxml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const privateDir = "/var/run/podvirt"

func loadVMI(t *testing.T, name string) *virtv1.VirtualMachineInstance {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var vmi virtv1.VirtualMachineInstance
	if err := yaml.UnmarshalStrict(data, &vmi); err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	return &vmi
}

// render is the golden form of a plan: the files and ports as a comment, then the domain XML.
func render(t *testing.T, plan *domainxml.Plan) string {
	t.Helper()
	out, err := plan.Domain.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<!-- memory: %d bytes\n", plan.MemoryBytes)
	for _, f := range plan.Files {
		fmt.Fprintf(&b, "     file %s %s volume=%s", f.Kind, f.Path, f.Volume)
		if f.Backing != "" {
			fmt.Fprintf(&b, " backing=%s (%s)", f.Backing, f.BackingFormat)
		}
		if f.Source != "" {
			fmt.Fprintf(&b, " source=%s label=%s", f.Source, f.Label)
		}
		if f.Size != 0 {
			fmt.Fprintf(&b, " size=%d", f.Size)
		}
		b.WriteString("\n")
	}
	for _, p := range plan.Ports {
		fmt.Fprintf(&b, "     forward %s/%d to interface %s\n", p.Protocol, p.Port, p.Interface)
	}
	b.WriteString("-->\n")
	b.WriteString(out)
	b.WriteString("\n")
	return b.String()
}

func TestGolden(t *testing.T) {
	cases := []struct {
		name string
		in   domainxml.Inputs
	}{
		{"vm-cirros", domainxml.Inputs{
			Emulation: true,
			ContainerDisks: map[string]domainxml.Image{
				"containerdisk": {Path: privateDir + "/disks/containerdisk/cirros.img", Format: "qcow2"},
			},
		}},
		{"kernelboot", domainxml.Inputs{
			Emulation: true,
			Kernel:    privateDir + "/kernelboot/kernel",
			Initrd:    privateDir + "/kernelboot/initrd",
		}},
		{"pvc-emptydisk", domainxml.Inputs{}},
		{"ports", domainxml.Inputs{Emulation: true}},
		{"multus", domainxml.Inputs{Emulation: true}},
		{"devices-clock", domainxml.Inputs{Emulation: true}},
		{"timezone", domainxml.Inputs{Emulation: true}},
		{"hyperv", domainxml.Inputs{}},
		{"efi", domainxml.Inputs{Emulation: true, ContainerDisks: map[string]domainxml.Image{"containerdisk": {Path: privateDir + "/disks/containerdisk/demo.qcow2", Format: "qcow2"}}}},
		{"efi-secureboot", domainxml.Inputs{Emulation: true, StateDir: "/var/run/podvirt-state", ContainerDisks: map[string]domainxml.Image{"containerdisk": {Path: privateDir + "/disks/containerdisk/demo.qcow2", Format: "qcow2"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := domainxml.Build(loadVMI(t, tc.name), tc.in)
			if err != nil {
				t.Fatalf("build: %v", err)
			}
			got := render(t, plan)
			golden := filepath.Join("testdata", tc.name+".xml")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("domain XML differs from %s (run with -update if intended):\n%s", golden, got)
			}
			// Round trip: the XML reads back into a domain that marshals to the same XML (nothing
			// libvirtxml cannot represent, nothing lost or reordered on the way).
			xmlText := strings.TrimSuffix(strings.SplitN(got, "-->\n", 2)[1], "\n")
			var back libvirtxml.Domain
			if err := back.Unmarshal(xmlText); err != nil {
				t.Fatalf("domain XML does not parse back: %v", err)
			}
			again, err := back.Marshal()
			if err != nil {
				t.Fatalf("marshal the parsed domain: %v", err)
			}
			if again != xmlText {
				t.Errorf("domain XML does not round-trip; after parse and marshal:\n%s", again)
			}
		})
	}
}

// TestMemoryIsExact checks the guest memory is passed through byte-exact, never rounded up here.
func TestMemoryIsExact(t *testing.T) {
	vmi := loadVMI(t, "vm-cirros")
	plan, err := domainxml.Build(vmi, domainxml.Inputs{ContainerDisks: map[string]domainxml.Image{"containerdisk": {Path: "/x", Format: "raw"}}})
	if err != nil {
		t.Fatal(err)
	}
	if plan.MemoryBytes != 64000000 || plan.Domain.Memory.Value != 64000000 || plan.Domain.Memory.Unit != "b" {
		t.Fatalf("memory = %d %d %s, want 64000000 bytes", plan.MemoryBytes, plan.Domain.Memory.Value, plan.Domain.Memory.Unit)
	}
	guest := resource.MustParse("100Mi")
	vmi.Spec.Domain.Memory = &virtv1.Memory{Guest: &guest}
	plan, err = domainxml.Build(vmi, domainxml.Inputs{ContainerDisks: map[string]domainxml.Image{"containerdisk": {Path: "/x", Format: "raw"}}})
	if err != nil {
		t.Fatal(err)
	}
	if plan.MemoryBytes != 100<<20 {
		t.Fatalf("memory.guest not preferred over requests: %d", plan.MemoryBytes)
	}
}

func TestStableMAC(t *testing.T) {
	vmi := loadVMI(t, "vm-cirros")
	a := domainxml.StableMAC(vmi, "default")
	if a != domainxml.StableMAC(vmi.DeepCopy(), "default") {
		t.Fatal("MAC not stable")
	}
	if a == domainxml.StableMAC(vmi, "other") {
		t.Fatal("MAC does not depend on the interface")
	}
	if !strings.HasPrefix(a, "52:54:00:") {
		t.Fatalf("MAC %s outside qemu's prefix", a)
	}
}

func TestErrorsNameTheField(t *testing.T) {
	cirros := domainxml.Inputs{ContainerDisks: map[string]domainxml.Image{"containerdisk": {Path: "/x", Format: "qcow2"}}}
	cases := []struct {
		name   string
		file   string
		in     domainxml.Inputs
		mutate func(*virtv1.VirtualMachineInstance)
		want   string
	}{
		{"bridge with user networking", "ports", domainxml.Inputs{}, func(v *virtv1.VirtualMachineInstance) {
			v.Spec.Domain.Devices.Interfaces[0].Masquerade = nil
			v.Spec.Domain.Devices.Interfaces[0].Bridge = &virtv1.InterfaceBridge{}
		}, "spec.domain.devices.interfaces[0].bridge: not supported with user-mode pod networking"},
		{"volume name leaving its directory", "vm-cirros", cirros, func(v *virtv1.VirtualMachineInstance) {
			v.Spec.Volumes[1].Name, v.Spec.Domain.Devices.Disks[1].Name = "../secrets", "../secrets"
		}, "spec.volumes[1].name"},
		{"disk without volume", "vm-cirros", cirros, func(v *virtv1.VirtualMachineInstance) {
			v.Spec.Volumes = v.Spec.Volumes[:1]
		}, `spec.domain.devices.disks[1]: no volume named "cloudinitdisk" in spec.volumes`},
		{"volume without source", "vm-cirros", cirros, func(v *virtv1.VirtualMachineInstance) {
			v.Spec.Volumes[1].CloudInitNoCloud = nil
		}, "spec.volumes[name=cloudinitdisk]: no volume source set"},
		{"containerDisk not copied", "vm-cirros", domainxml.Inputs{}, nil,
			"spec.volumes[name=containerdisk].containerDisk: no image was copied out of kubevirt/cirros-container-disk-demo:latest"},
		{"lun", "vm-cirros", cirros, func(v *virtv1.VirtualMachineInstance) {
			v.Spec.Domain.Devices.Disks[0].Disk = nil
			v.Spec.Domain.Devices.Disks[0].LUN = &virtv1.LunTarget{}
		}, "spec.domain.devices.disks[0].lun: not supported"},
		{"cdrom on virtio", "vm-cirros", cirros, func(v *virtv1.VirtualMachineInstance) {
			v.Spec.Domain.Devices.Disks[1].Disk = nil
			v.Spec.Domain.Devices.Disks[1].CDRom = &virtv1.CDRomTarget{Bus: virtv1.DiskBusVirtio}
		}, "spec.domain.devices.disks[1].cdrom.bus: virtio cannot carry a cdrom"},
		{"no memory", "vm-cirros", cirros, func(v *virtv1.VirtualMachineInstance) {
			v.Spec.Domain.Resources.Requests = nil
		}, "spec.domain.resources.requests.memory: required"},
		{"no firmware uuid and no uid", "vm-cirros", cirros, func(v *virtv1.VirtualMachineInstance) {
			v.Spec.Domain.Firmware = nil
			v.UID = ""
		}, "spec.domain.firmware.uuid: required"},
		{"kernel not copied", "kernelboot", domainxml.Inputs{}, nil,
			"spec.domain.firmware.kernelBoot.container.kernelPath: /boot/vmlinux was not copied into /var/run/podvirt/kernelboot"},
		{"interface without network", "ports", domainxml.Inputs{}, func(v *virtv1.VirtualMachineInstance) {
			v.Spec.Networks = v.Spec.Networks[:1]
		}, `spec.domain.devices.interfaces[1]: no network named "second" in spec.networks`},
		{"bad protocol", "ports", domainxml.Inputs{}, func(v *virtv1.VirtualMachineInstance) {
			v.Spec.Domain.Devices.Interfaces[0].Ports[0].Protocol = "SCTP"
		}, `spec.domain.devices.interfaces[0].ports[0].protocol: "SCTP" is not TCP or UDP`},
		{"bad vm network", "ports", domainxml.Inputs{}, func(v *virtv1.VirtualMachineInstance) {
			v.Spec.Networks[1].Pod.VMNetworkCIDR = "10.0.0.0"
		}, `spec.networks[name=second].pod.vmNetworkCIDR: "10.0.0.0" is not an IPv4 CIDR`},
		{"a guest CIDR too small", "ports", domainxml.Inputs{}, func(v *virtv1.VirtualMachineInstance) {
			v.Spec.Networks[1].Pod.VMNetworkCIDR = "10.0.0.0/31"
		}, `spec.networks[name=second].pod.vmNetworkCIDR: "10.0.0.0/31" leaves no room for the guest and its gateway (prefix at most /30)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vmi := loadVMI(t, tc.file)
			if tc.mutate != nil {
				tc.mutate(vmi)
			}
			_, err := domainxml.Build(vmi, tc.in)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// TestMetadataCarriesIdentity checks the domain says which VMI it belongs to.
func TestMetadataCarriesIdentity(t *testing.T) {
	plan, err := domainxml.Build(loadVMI(t, "ports"), domainxml.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	var md struct {
		XMLName xml.Name `xml:"vmi"`
		UID     string   `xml:"uid,attr"`
		Ports   []struct {
			Port int `xml:"port,attr"`
		} `xml:"port"`
	}
	if err := xml.Unmarshal([]byte(plan.Domain.Metadata.XML), &md); err != nil {
		t.Fatal(err)
	}
	if md.UID != "6f1c9d2e-0000-4000-8000-000000000004" || len(md.Ports) != 4 || md.Ports[0].Port != 80 || md.Ports[2].Port != 8080 || md.Ports[3].Port != 8081 { // 8080, 8081: the probes'
		t.Fatalf("metadata = %+v", md)
	}
}

// A bare instance (no VirtualMachine set a firmware UUID) is its own UUID.
func TestBareInstanceUsesItsUID(t *testing.T) {
	v := &virtv1.VirtualMachineInstance{}
	v.UID = "0f5d1b1e-8f2c-4c43-9b8e-1d2c3b4a5f60"
	v.Spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64M")}
	plan, err := domainxml.Build(v, domainxml.Inputs{PrivateDir: privateDir})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Domain.UUID != "0f5d1b1e-8f2c-4c43-9b8e-1d2c3b4a5f60" {
		t.Fatalf("domain UUID %q is not the instance's UID", plan.Domain.UUID)
	}
}

// Under emulation the enlightenments that need KVM fail the build naming the field; the others map.
func TestHyperVUnderEmulation(t *testing.T) {
	vmi := loadVMI(t, "hyperv")
	_, err := domainxml.Build(vmi, domainxml.Inputs{Emulation: true})
	if err == nil || !strings.HasPrefix(err.Error(), "spec.domain.features.hyperv.vpindex: needs KVM") {
		t.Fatalf("want the vpindex refusal, got %v", err)
	}
	h := vmi.Spec.Domain.Features.Hyperv
	h.VPIndex, h.SyNIC, h.SyNICTimer, h.Reenlightenment, h.TLBFlush, h.IPI = nil, nil, nil, nil, nil, nil
	plan, err := domainxml.Build(vmi, domainxml.Inputs{Emulation: true})
	if err != nil {
		t.Fatal(err)
	}
	if hv := plan.Domain.Features.HyperV; hv == nil || hv.Relaxed == nil || hv.Spinlocks.Retries != 8191 || hv.VendorId.Value != "KVMKVMKVM" {
		t.Errorf("hyperv under emulation: %+v", hv)
	}
}

// TestEmulatorDefaultCPU: only an emulated guest with qemu's default CPU and no CPU-dependent
// feature lets libvirt read the started vCPU the short way.
func TestEmulatorDefaultCPU(t *testing.T) {
	withCPU := func(cpu *virtv1.CPU) func(*virtv1.VirtualMachineInstance) {
		return func(v *virtv1.VirtualMachineInstance) { v.Spec.Domain.CPU = cpu }
	}
	// hyperv.yaml's features, emulation-proof, keeping only Hyper-V, KVM's or PV spinlocks.
	only := func(hyperv, kvm, spinlocks bool) func(*virtv1.VirtualMachineInstance) {
		return func(v *virtv1.VirtualMachineInstance) {
			f := v.Spec.Domain.Features
			h := f.Hyperv
			h.VPIndex, h.SyNIC, h.SyNICTimer, h.Reenlightenment, h.TLBFlush, h.IPI = nil, nil, nil, nil, nil, nil
			v.Spec.Domain.CPU = nil
			if !hyperv {
				f.Hyperv = nil
			}
			if !kvm {
				f.KVM = nil
			}
			if !spinlocks {
				f.Pvspinlock = nil
			}
		}
	}
	for _, tc := range []struct {
		name, golden string
		emulation    bool
		change       func(*virtv1.VirtualMachineInstance)
		want         bool
	}{
		{"emulated, no CPU", "vm-cirros", true, nil, true},
		{"emulated, kernel boot", "kernelboot", true, nil, true},
		{"emulated, host-model means nothing", "vm-cirros", true, withCPU(&virtv1.CPU{Model: "host-model"}), true},
		{"emulated, topology only", "vm-cirros", true, withCPU(&virtv1.CPU{Cores: 2}), true},
		{"KVM", "vm-cirros", false, nil, false},
		{"emulated, a named model", "vm-cirros", true, withCPU(&virtv1.CPU{Model: "Westmere"}), false},
		{"emulated, a feature", "vm-cirros", true, withCPU(&virtv1.CPU{Features: []virtv1.CPUFeature{{Name: "pcid"}}}), false},
		{"emulated, none of hyperv.yaml's features", "hyperv", true, only(false, false, false), true},
		{"emulated, Hyper-V", "hyperv", true, only(true, false, false), false},
		{"emulated, KVM hidden", "hyperv", true, only(false, true, false), false},
		{"emulated, PV spinlocks", "hyperv", true, only(false, false, true), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vmi := loadVMI(t, tc.golden)
			if tc.change != nil {
				tc.change(vmi)
			}
			plan, err := domainxml.Build(vmi, domainxml.Inputs{Emulation: tc.emulation, Kernel: privateDir + "/kernelboot/kernel", Initrd: privateDir + "/kernelboot/initrd",
				ContainerDisks: map[string]domainxml.Image{"containerdisk": {Path: privateDir + "/disks/containerdisk/cirros.img", Format: "qcow2"}}})
			if err != nil {
				t.Fatal(err)
			}
			if got := domainxml.EmulatorDefaultCPU(plan.Domain); got != tc.want {
				t.Errorf("EmulatorDefaultCPU = %v, want %v (cpu %+v)", got, tc.want, plan.Domain.CPU)
			}
		})
	}
}
