package v1

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestAccessCredentialErrors(t *testing.T) {
	secret := &AccessCredentialSecretSource{SecretName: "keys"}
	agentKeys := func(users ...string) AccessCredential {
		return AccessCredential{SSHPublicKey: &SSHPublicKeyAccessCredential{Source: SSHPublicKeyAccessCredentialSource{Secret: secret},
			PropagationMethod: SSHPublicKeyAccessCredentialPropagationMethod{QemuGuestAgent: &QemuGuestAgentSSHPublicKeyAccessCredentialPropagation{Users: users}}}}
	}
	noCloudKeys := AccessCredential{SSHPublicKey: &SSHPublicKeyAccessCredential{Source: SSHPublicKeyAccessCredentialSource{Secret: secret},
		PropagationMethod: SSHPublicKeyAccessCredentialPropagationMethod{NoCloud: &NoCloudSSHPublicKeyAccessCredentialPropagation{}}}}
	configDriveKeys := AccessCredential{SSHPublicKey: &SSHPublicKeyAccessCredential{Source: SSHPublicKeyAccessCredentialSource{Secret: secret},
		PropagationMethod: SSHPublicKeyAccessCredentialPropagationMethod{ConfigDrive: &ConfigDriveSSHPublicKeyAccessCredentialPropagation{}}}}
	password := AccessCredential{UserPassword: &UserPasswordAccessCredential{Source: UserPasswordAccessCredentialSource{Secret: secret},
		PropagationMethod: UserPasswordAccessCredentialPropagationMethod{QemuGuestAgent: &QemuGuestAgentUserPasswordAccessCredentialPropagation{}}}}
	noCloudVolume := []Volume{{Name: "ci", VolumeSource: VolumeSource{CloudInitNoCloud: &CloudInitNoCloudSource{UserData: "#cloud-config\n"}}}}
	many := make([]AccessCredential, MaxAccessCredentials+1)
	for i := range many {
		many[i] = password
	}
	for _, tc := range []struct {
		name    string
		creds   []AccessCredential
		volumes []Volume
		field   string // of the first error; "" for none
	}{
		{"agent keys", []AccessCredential{agentKeys("fedora", "root")}, nil, ""},
		{"password", []AccessCredential{password}, nil, ""},
		{"noCloud keys with a noCloud volume", []AccessCredential{noCloudKeys}, noCloudVolume, ""},
		{"one Secret twice, as KubeVirt allows", []AccessCredential{agentKeys("fedora"), noCloudKeys}, noCloudVolume, ""},
		{"noCloud keys without the volume", []AccessCredential{noCloudKeys}, nil, "spec.accessCredentials[0].sshPublicKey.propagationMethod.noCloud"},
		{"configDrive keys with only a noCloud volume", []AccessCredential{configDriveKeys}, noCloudVolume, "spec.accessCredentials[0].sshPublicKey.propagationMethod.configDrive"},
		{"no users", []AccessCredential{agentKeys()}, nil, "spec.accessCredentials[0].sshPublicKey.propagationMethod.qemuGuestAgent.users"},
		{"a user that is a path", []AccessCredential{agentKeys("../../root")}, nil, "spec.accessCredentials[0].sshPublicKey.propagationMethod.qemuGuestAgent.users[0]"},
		{"a user with a newline", []AccessCredential{agentKeys("root\nx")}, nil, "spec.accessCredentials[0].sshPublicKey.propagationMethod.qemuGuestAgent.users[0]"},
		{"domain and Windows users, as KubeVirt takes them", []AccessCredential{agentKeys("jane@ad.example.com", "Jane Doe", "MACHINE$")}, nil, ""},
		{"an empty user", []AccessCredential{agentKeys("")}, nil, "spec.accessCredentials[0].sshPublicKey.propagationMethod.qemuGuestAgent.users[0]"},
		{"a user too long", []AccessCredential{agentKeys(strings.Repeat("u", MaxGuestUserNameLength+1))}, nil, "spec.accessCredentials[0].sshPublicKey.propagationMethod.qemuGuestAgent.users[0]"},
		{"two methods", []AccessCredential{func() AccessCredential {
			c := agentKeys("fedora")
			c.SSHPublicKey.PropagationMethod.NoCloud = &NoCloudSSHPublicKeyAccessCredentialPropagation{}
			return c
		}()}, noCloudVolume, "spec.accessCredentials[0].sshPublicKey.propagationMethod"},
		{"no method", []AccessCredential{{SSHPublicKey: &SSHPublicKeyAccessCredential{Source: SSHPublicKeyAccessCredentialSource{Secret: secret}}}}, nil, "spec.accessCredentials[0].sshPublicKey.propagationMethod"},
		{"password without a method", []AccessCredential{{UserPassword: &UserPasswordAccessCredential{Source: UserPasswordAccessCredentialSource{Secret: secret}}}}, nil, "spec.accessCredentials[0].userPassword.propagationMethod.qemuGuestAgent"},
		{"no source", []AccessCredential{{UserPassword: &UserPasswordAccessCredential{PropagationMethod: password.UserPassword.PropagationMethod}}}, nil, "spec.accessCredentials[0].userPassword.source.secret.secretName"},
		{"both kinds", []AccessCredential{{SSHPublicKey: agentKeys("a").SSHPublicKey, UserPassword: password.UserPassword}}, nil, "spec.accessCredentials[0]"},
		{"neither kind", []AccessCredential{{}}, nil, "spec.accessCredentials[0]"},
		{"too many", many, nil, "spec.accessCredentials"},
	} {
		s := &VirtualMachineInstanceSpec{AccessCredentials: tc.creds, Volumes: tc.volumes}
		errs := s.AccessCredentialErrors(field.NewPath("spec", "accessCredentials"))
		if tc.field == "" {
			assert.Empty(t, errs, tc.name)
			continue
		}
		if assert.NotEmpty(t, errs, tc.name) {
			assert.Equal(t, tc.field, errs[0].Field, tc.name)
		}
	}
}
