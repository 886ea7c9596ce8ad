package v1

import (
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Bounds of spec.accessCredentials: what one instance may ask the launcher to read and push into its guest.
const (
	// MaxAccessCredentials is the most entries spec.accessCredentials may have.
	MaxAccessCredentials = 16
	// MaxCredentialUsers is the most users one qemuGuestAgent propagation may name.
	MaxCredentialUsers = 32
	// MaxGuestUserNameLength is the longest guest user name (Linux's useradd takes 32).
	MaxGuestUserNameLength = 32
)

// guestUserName is a user name as guests know them: letters, digits, _ . - (not first, but _), and a
// trailing $ as Samba's machine accounts have.
var guestUserName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*\$?$`)

// ValidGuestUserName says whether name can name a user in the guest (the user names of
// propagationMethod.qemuGuestAgent.users, and the keys of a userPassword Secret).
func ValidGuestUserName(name string) bool {
	return len(name) <= MaxGuestUserNameLength && guestUserName.MatchString(name)
}

// SecretName is the Secret the credential reads, or "" when it names none.
func (c *AccessCredential) SecretName() string {
	switch {
	case c.SSHPublicKey != nil && c.SSHPublicKey.Source.Secret != nil:
		return c.SSHPublicKey.Source.Secret.SecretName
	case c.UserPassword != nil && c.UserPassword.Source.Secret != nil:
		return c.UserPassword.Source.Secret.SecretName
	}
	return ""
}

// ThroughAgent says whether the guest agent propagates the credential (at run time, as its Secret changes).
func (c *AccessCredential) ThroughAgent() bool {
	return (c.SSHPublicKey != nil && c.SSHPublicKey.PropagationMethod.QemuGuestAgent != nil) ||
		(c.UserPassword != nil && c.UserPassword.PropagationMethod.QemuGuestAgent != nil)
}

// AccessCredentialErrors checks spec.accessCredentials as KubeVirt does, and within Podvirt's bounds:
// one kind and one source each, one propagation method, a cloud-init volume of the kind a cloud-init
// propagation writes into, guest users named (NameErrors checks the Secrets' names).
func (s *VirtualMachineInstanceSpec) AccessCredentialErrors(fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if n := len(s.AccessCredentials); n > MaxAccessCredentials {
		return field.ErrorList{field.TooMany(fld, n, MaxAccessCredentials)}
	}
	hasNoCloud, hasConfigDrive := false, false
	for _, v := range s.Volumes {
		hasNoCloud = hasNoCloud || v.CloudInitNoCloud != nil
		hasConfigDrive = hasConfigDrive || v.CloudInitConfigDrive != nil
	}
	for i := range s.AccessCredentials {
		c := &s.AccessCredentials[i]
		p := fld.Index(i)
		switch {
		case c.SSHPublicKey != nil && c.UserPassword != nil:
			errs = append(errs, field.Invalid(p, "sshPublicKey, userPassword", "set exactly one of sshPublicKey and userPassword"))
			continue
		case c.SSHPublicKey != nil:
			errs = append(errs, sshKeyErrors(c.SSHPublicKey, hasNoCloud, hasConfigDrive, p.Child("sshPublicKey"))...)
			p = p.Child("sshPublicKey")
		case c.UserPassword != nil:
			p = p.Child("userPassword")
			if c.UserPassword.PropagationMethod.QemuGuestAgent == nil {
				errs = append(errs, field.Required(p.Child("propagationMethod", "qemuGuestAgent"), "passwords reach the guest only through the guest agent"))
			}
		default:
			errs = append(errs, field.Required(p, "set exactly one of sshPublicKey and userPassword"))
			continue
		}
		if c.SecretName() == "" {
			errs = append(errs, field.Required(p.Child("source", "secret", "secretName"), "the Secret holding the credential"))
		}
	}
	return errs
}

// sshKeyErrors checks one sshPublicKey credential's propagation method.
func sshKeyErrors(c *SSHPublicKeyAccessCredential, hasNoCloud, hasConfigDrive bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	m, mp := c.PropagationMethod, p.Child("propagationMethod")
	set := 0
	if m.NoCloud != nil {
		set++
		if !hasNoCloud {
			errs = append(errs, field.Invalid(mp.Child("noCloud"), "{}", "needs a cloudInitNoCloud volume to write the keys into"))
		}
	}
	if m.ConfigDrive != nil {
		set++
		if !hasConfigDrive {
			errs = append(errs, field.Invalid(mp.Child("configDrive"), "{}", "needs a cloudInitConfigDrive volume to write the keys into"))
		}
	}
	if a := m.QemuGuestAgent; a != nil {
		set++
		up := mp.Child("qemuGuestAgent", "users")
		switch n := len(a.Users); {
		case n == 0:
			errs = append(errs, field.Required(up, "the guest users whose authorized_keys get the keys"))
		case n > MaxCredentialUsers:
			errs = append(errs, field.TooMany(up, n, MaxCredentialUsers))
		}
		for j, u := range a.Users {
			if !ValidGuestUserName(u) {
				errs = append(errs, field.Invalid(up.Index(j), u, fmt.Sprintf("not a user name: letters, digits, _ . - (not first), at most %d characters", MaxGuestUserNameLength)))
			}
		}
	}
	if set != 1 {
		errs = append(errs, field.Invalid(mp, set, "set exactly one of noCloud, configDrive and qemuGuestAgent"))
	}
	return errs
}
