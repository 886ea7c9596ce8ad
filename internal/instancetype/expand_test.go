package instancetype

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	itv1beta1 "github.com/podvirt/podvirt/api/instancetype/v1beta1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

func template() *virtv1.VirtualMachineInstanceSpec {
	return &virtv1.VirtualMachineInstanceSpec{Domain: virtv1.DomainSpec{Devices: virtv1.Devices{
		Disks:      []virtv1.Disk{{Name: "root"}, {Name: "iso", CDRom: &virtv1.CDRomTarget{}}, {Name: "data", Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusSATA}}},
		Interfaces: []virtv1.Interface{{Name: "default"}, {Name: "second", Model: "rtl8139", Masquerade: &virtv1.InterfaceMasquerade{}}},
	}}}
}

func small() *itv1beta1.VirtualMachineInstancetypeSpec {
	return &itv1beta1.VirtualMachineInstancetypeSpec{
		CPU:          itv1beta1.CPUInstancetype{Guest: 4},
		Memory:       itv1beta1.MemoryInstancetype{Guest: resource.MustParse("256Mi")},
		NodeSelector: map[string]string{"disk": "ssd"},
		Annotations:  map[string]string{"from": "instancetype", "kept": "instancetype"},
	}
}

func TestApplyInstancetypeSizesTheGuest(t *testing.T) {
	for _, tc := range []struct {
		topology                itv1beta1.PreferredCPUTopology
		sockets, cores, threads uint32
	}{
		{"", 4, 1, 1},
		{itv1beta1.Cores, 1, 4, 1},
		{itv1beta1.Threads, 1, 1, 4},
		{itv1beta1.DeprecatedPreferCores, 1, 4, 1},
		{itv1beta1.Spread, 2, 2, 1},
	} {
		t.Run(string(tc.topology), func(t *testing.T) {
			spec := template()
			pref := &itv1beta1.VirtualMachinePreferenceSpec{}
			if tc.topology != "" {
				pref.CPU = &itv1beta1.CPUPreferences{PreferredCPUTopology: ptr.To(tc.topology)}
			}
			ann := map[string]string{"kept": "template"}
			Apply(Specs{Instancetype: small(), Preference: pref}, spec, ann)
			assert.Equal(t, [3]uint32{tc.sockets, tc.cores, tc.threads}, [3]uint32{spec.Domain.CPU.Sockets, spec.Domain.CPU.Cores, spec.Domain.CPU.Threads})
			assert.Equal(t, 4, spec.Domain.VCPUs())
			guest, err := spec.Domain.GuestMemory()
			require.NoError(t, err)
			assert.Equal(t, "256Mi", guest.String())
			assert.Equal(t, map[string]string{"disk": "ssd"}, spec.NodeSelector)
			assert.Equal(t, map[string]string{"from": "instancetype", "kept": "template"}, ann, "the template's annotations win")
		})
	}
}

func TestOvercommitPercentLowersTheRequest(t *testing.T) {
	it := small()
	it.Memory.OvercommitPercent = 25
	spec := template()
	Apply(Specs{Instancetype: it}, spec, map[string]string{})
	assert.Equal(t, int64(192<<20), spec.Domain.Resources.Requests.Memory().Value())
	guest, err := spec.Domain.GuestMemory()
	require.NoError(t, err)
	assert.Equal(t, "256Mi", guest.String(), "the guest still sees all of it")
}

func TestConflictsNameWhatTheInstancetypeFixes(t *testing.T) {
	spec := template()
	spec.Domain.CPU = &virtv1.CPU{Cores: 2}
	spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	spec.NodeSelector = map[string]string{"a": "b"}
	var got []string
	for _, e := range Conflicts(small(), spec, field.NewPath("spec", "template", "spec")) {
		got = append(got, e.Field)
	}
	assert.Equal(t, []string{"spec.template.spec.domain.cpu.cores", "spec.template.spec.domain.resources.requests.memory", "spec.template.spec.nodeSelector"}, got)
	assert.Empty(t, Conflicts(small(), template(), field.NewPath("spec")))
	assert.Empty(t, Conflicts(nil, spec, field.NewPath("spec")), "no instancetype, no conflict")
}

func TestPreferenceFillsOnlyWhatTheTemplateLeavesUnset(t *testing.T) {
	pref := &itv1beta1.VirtualMachinePreferenceSpec{
		Devices: &itv1beta1.DevicePreferences{
			PreferredDiskBus: virtv1.DiskBusSCSI, PreferredCdromBus: virtv1.DiskBusSATA, PreferredInterfaceModel: "e1000",
			PreferredRng: &virtv1.Rng{}, PreferredAutoattachGraphicsDevice: ptr.To(false),
		},
		Machine:                                &itv1beta1.MachinePreferences{PreferredMachineType: "pc-q35-7.2"},
		Firmware:                               &itv1beta1.FirmwarePreferences{PreferredUseBios: ptr.To(true), PreferredUseBiosSerial: ptr.To(true)},
		PreferredTerminationGracePeriodSeconds: ptr.To(int64(30)),
		Annotations:                            map[string]string{"os": "fedora"},
	}
	spec := template()
	spec.TerminationGracePeriodSeconds = ptr.To(int64(5))
	ann := map[string]string{}
	Apply(Specs{Preference: pref}, spec, ann)
	d := spec.Domain
	assert.Equal(t, virtv1.DiskBusSCSI, d.Devices.Disks[0].Disk.Bus, "a disk without a target gets the preferred bus")
	assert.Equal(t, virtv1.DiskBusSATA, d.Devices.Disks[1].CDRom.Bus)
	assert.Equal(t, virtv1.DiskBusSATA, d.Devices.Disks[2].Disk.Bus, "the template's bus wins")
	assert.Equal(t, "e1000", d.Devices.Interfaces[0].Model)
	assert.Equal(t, "rtl8139", d.Devices.Interfaces[1].Model)
	assert.NotNil(t, d.Devices.Rng)
	assert.False(t, *d.Devices.AutoattachGraphicsDevice)
	assert.Equal(t, "pc-q35-7.2", d.Machine.Type)
	assert.True(t, *d.Firmware.Bootloader.BIOS.UseSerial)
	assert.Equal(t, int64(5), *spec.TerminationGracePeriodSeconds)
	assert.Equal(t, "fedora", ann["os"])
}

func TestRequirements(t *testing.T) {
	pref := &itv1beta1.VirtualMachinePreferenceSpec{Requirements: &itv1beta1.PreferenceRequirements{
		CPU:    &itv1beta1.CPUPreferenceRequirement{Guest: 8},
		Memory: &itv1beta1.MemoryPreferenceRequirement{Guest: resource.MustParse("1Gi")},
	}}
	spec := template()
	Apply(Specs{Instancetype: small(), Preference: pref}, spec, map[string]string{})
	var got []string
	for _, e := range Requirements(pref, spec, field.NewPath("spec")) {
		got = append(got, e.Error())
	}
	assert.Equal(t, []string{
		"spec.domain.cpu: Invalid value: 4: the preference requires at least 8 vCPUs",
		`spec.domain.memory.guest: Invalid value: "256Mi": the preference requires at least 1Gi of guest memory`,
	}, got)
}

func TestSpreadAcrossAndRatio(t *testing.T) {
	for _, tc := range []struct {
		across                  itv1beta1.SpreadAcross
		ratio, guest            uint32
		sockets, cores, threads uint32
		fits                    bool
	}{
		{itv1beta1.SpreadAcrossSocketsCores, 2, 2, 1, 2, 1, true},
		{itv1beta1.SpreadAcrossSocketsCores, 4, 8, 2, 4, 1, true},
		{itv1beta1.SpreadAcrossCoresThreads, 2, 8, 1, 4, 2, true},
		{itv1beta1.SpreadAcrossSocketsCoresThreads, 2, 8, 2, 2, 2, true},
		{itv1beta1.SpreadAcrossSocketsCores, 2, 3, 3, 1, 1, false},
	} {
		it := small()
		it.CPU.Guest = tc.guest
		pref := &itv1beta1.VirtualMachinePreferenceSpec{CPU: &itv1beta1.CPUPreferences{
			PreferredCPUTopology: ptr.To(itv1beta1.Spread),
			SpreadOptions:        &itv1beta1.SpreadOptions{Across: ptr.To(tc.across), Ratio: ptr.To(tc.ratio)},
		}}
		spec := template()
		Apply(Specs{Instancetype: it, Preference: pref}, spec, map[string]string{})
		c := spec.Domain.CPU
		assert.Equal(t, [3]uint32{tc.sockets, tc.cores, tc.threads}, [3]uint32{c.Sockets, c.Cores, c.Threads}, "%s %d/%d", tc.across, tc.guest, tc.ratio)
		err := SpreadError(Specs{Instancetype: it, Preference: pref}, field.NewPath("spec", "instancetype"))
		assert.Equal(t, tc.fits, err == nil, "%s %d/%d: %v", tc.across, tc.guest, tc.ratio, err)
	}
}

func TestInstancetypeDevicesAreCopies(t *testing.T) {
	it := small()
	it.GPUs = []virtv1.GPU{{Name: "g", DeviceName: "nvidia.com/A10", VirtualGPUOptions: &virtv1.VGPUOptions{Display: &virtv1.VGPUDisplayOptions{Enabled: ptr.To(true)}}}}
	spec := template()
	Apply(Specs{Instancetype: it}, spec, map[string]string{})
	*spec.Domain.Devices.GPUs[0].VirtualGPUOptions.Display.Enabled = false
	assert.True(t, *it.GPUs[0].VirtualGPUOptions.Display.Enabled, "the instancetype's spec is not shared with the instance")
}
