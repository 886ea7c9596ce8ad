package v1

// AccessCredential is a credential put into the guest; exactly one field is set.
type AccessCredential struct {
	// SSHPublicKey adds SSH public keys to the guest.
	// +optional
	SSHPublicKey *SSHPublicKeyAccessCredential `json:"sshPublicKey,omitempty"`
	// UserPassword sets passwords of guest users.
	// +optional
	UserPassword *UserPasswordAccessCredential `json:"userPassword,omitempty"`
}

// SSHPublicKeyAccessCredential says where SSH public keys come from and how they reach the guest.
type SSHPublicKeyAccessCredential struct {
	// Source of the keys.
	Source SSHPublicKeyAccessCredentialSource `json:"source"`
	// PropagationMethod is how the keys reach the guest.
	PropagationMethod SSHPublicKeyAccessCredentialPropagationMethod `json:"propagationMethod"`
}

// SSHPublicKeyAccessCredentialSource is where SSH public keys come from; exactly one field is set.
type SSHPublicKeyAccessCredentialSource struct {
	// Secret whose values are public keys.
	// +optional
	Secret *AccessCredentialSecretSource `json:"secret,omitempty"`
}

// SSHPublicKeyAccessCredentialPropagationMethod is how SSH public keys reach the guest; exactly one
// field is set.
type SSHPublicKeyAccessCredentialPropagationMethod struct {
	// ConfigDrive writes the keys into the cloud-init config drive metadata.
	// +optional
	ConfigDrive *ConfigDriveSSHPublicKeyAccessCredentialPropagation `json:"configDrive,omitempty"`
	// NoCloud writes the keys into the cloud-init NoCloud metadata.
	// +optional
	NoCloud *NoCloudSSHPublicKeyAccessCredentialPropagation `json:"noCloud,omitempty"`
	// QemuGuestAgent writes the keys at run time through the guest agent.
	// +optional
	QemuGuestAgent *QemuGuestAgentSSHPublicKeyAccessCredentialPropagation `json:"qemuGuestAgent,omitempty"`
}

// ConfigDriveSSHPublicKeyAccessCredentialPropagation selects config drive propagation; it has no settings.
type ConfigDriveSSHPublicKeyAccessCredentialPropagation struct{}

// NoCloudSSHPublicKeyAccessCredentialPropagation selects NoCloud propagation; it has no settings.
type NoCloudSSHPublicKeyAccessCredentialPropagation struct{}

// QemuGuestAgentSSHPublicKeyAccessCredentialPropagation writes keys through the guest agent.
type QemuGuestAgentSSHPublicKeyAccessCredentialPropagation struct {
	// Users whose authorized_keys receive the keys.
	// +listType=set
	Users []string `json:"users"`
}

// UserPasswordAccessCredential says where user passwords come from and how they reach the guest.
type UserPasswordAccessCredential struct {
	// Source of the passwords.
	Source UserPasswordAccessCredentialSource `json:"source"`
	// PropagationMethod is how the passwords reach the guest.
	PropagationMethod UserPasswordAccessCredentialPropagationMethod `json:"propagationMethod"`
}

// UserPasswordAccessCredentialSource is where user passwords come from; exactly one field is set.
type UserPasswordAccessCredentialSource struct {
	// Secret mapping user names to passwords.
	// +optional
	Secret *AccessCredentialSecretSource `json:"secret,omitempty"`
}

// UserPasswordAccessCredentialPropagationMethod is how passwords reach the guest; exactly one field is set.
type UserPasswordAccessCredentialPropagationMethod struct {
	// QemuGuestAgent sets the passwords at run time through the guest agent.
	// +optional
	QemuGuestAgent *QemuGuestAgentUserPasswordAccessCredentialPropagation `json:"qemuGuestAgent,omitempty"`
}

// QemuGuestAgentUserPasswordAccessCredentialPropagation selects guest agent propagation; it has no settings.
type QemuGuestAgentUserPasswordAccessCredentialPropagation struct{}

// AccessCredentialSecretSource names a Secret in the instance's namespace.
type AccessCredentialSecretSource struct {
	// SecretName is the Secret's name.
	SecretName string `json:"secretName"`
}
