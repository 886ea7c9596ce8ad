package v1

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// A name from a spec is never a path: every name that reaches the node must be a DNS label (a
// subdomain for a Secret's), whatever it tries.
func TestNameErrors(t *testing.T) {
	spec := func(f func(*VirtualMachineInstanceSpec)) *VirtualMachineInstanceSpec {
		s := &VirtualMachineInstanceSpec{
			Volumes:  []Volume{{Name: "rootdisk"}, {Name: "cloudinit", VolumeSource: VolumeSource{CloudInitNoCloud: &CloudInitNoCloudSource{SecretRef: &corev1.LocalObjectReference{Name: "user.data-1"}}}}},
			Networks: []Network{{Name: "default"}},
		}
		s.Domain.Devices.Disks = []Disk{{Name: "rootdisk"}}
		s.Domain.Devices.Interfaces = []Interface{{Name: "default"}}
		f(s)
		return s
	}
	for _, tc := range []struct {
		name  string
		spec  *VirtualMachineInstanceSpec
		field string
	}{
		{"all fine", spec(func(*VirtualMachineInstanceSpec) {}), ""},
		{"volume climbing out", spec(func(s *VirtualMachineInstanceSpec) { s.Volumes[0].Name = "../../../../usr/bin" }), "spec.volumes[0].name"},
		{"volume naming the exit file", spec(func(s *VirtualMachineInstanceSpec) { s.Volumes[0].Name = "../launcher-exit.json" }), "spec.volumes[0].name"},
		{"volume dot-dot", spec(func(s *VirtualMachineInstanceSpec) { s.Volumes[0].Name = ".." }), "spec.volumes[0].name"},
		{"volume with a slash", spec(func(s *VirtualMachineInstanceSpec) { s.Volumes[0].Name = "a/b" }), "spec.volumes[0].name"},
		{"volume upper case", spec(func(s *VirtualMachineInstanceSpec) { s.Volumes[0].Name = "Root" }), "spec.volumes[0].name"},
		{"disk", spec(func(s *VirtualMachineInstanceSpec) { s.Domain.Devices.Disks[0].Name = "x/../../y" }), "spec.domain.devices.disks[0].name"},
		{"interface", spec(func(s *VirtualMachineInstanceSpec) { s.Domain.Devices.Interfaces[0].Name = "eth0;reboot" }), "spec.domain.devices.interfaces[0].name"},
		{"network", spec(func(s *VirtualMachineInstanceSpec) { s.Networks[0].Name = "a.b" }), "spec.networks[0].name"},
		{"cloud-init secret", spec(func(s *VirtualMachineInstanceSpec) { s.Volumes[1].CloudInitNoCloud.SecretRef.Name = "../../secrets" }), "spec.volumes[1].cloudInitNoCloud.secretRef.name"},
		{"config drive network secret", spec(func(s *VirtualMachineInstanceSpec) {
			s.Volumes[1].CloudInitNoCloud = nil
			s.Volumes[1].CloudInitConfigDrive = &CloudInitConfigDriveSource{NetworkDataSecretRef: &corev1.LocalObjectReference{Name: "/etc"}}
		}), "spec.volumes[1].cloudInitConfigDrive.networkDataSecretRef.name"},
		{"access credential secret", spec(func(s *VirtualMachineInstanceSpec) {
			s.AccessCredentials = []AccessCredential{{UserPassword: &UserPasswordAccessCredential{
				Source: UserPasswordAccessCredentialSource{Secret: &AccessCredentialSecretSource{SecretName: "../podvirt-private"}},
			}}}
		}), "spec.accessCredentials[0].userPassword.source.secret.secretName"},
	} {
		errs := tc.spec.NameErrors(field.NewPath("spec"))
		if tc.field == "" {
			assert.Empty(t, errs, tc.name)
			continue
		}
		if assert.Len(t, errs, 1, tc.name) {
			assert.Equal(t, tc.field, errs[0].Field, tc.name)
		}
	}
}
