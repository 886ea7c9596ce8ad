package v1

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Bounds of spec.accessCredentials: what one instance may ask the launcher to read and push into its guest.
const (
	// MaxAccessCredentials is the most entries spec.accessCredentials may have (KubeVirt's schema's).
	MaxAccessCredentials = 256
	// MaxCredentialUsers is the most users one qemuGuestAgent propagation, or one password Secret, may name.
	MaxCredentialUsers = 256
	// MaxGuestUserNameLength is the longest guest user name, in bytes.
	MaxGuestUserNameLength = 256
	// MaxCredentialPasswordLength is the longest password a userPassword Secret may hold, in bytes.
	MaxCredentialPasswordLength = 1 << 10
)

// GuestUserNameRule says what ValidGuestUserName accepts, for messages.
const GuestUserNameRule = "a user name: 1 to 256 bytes of UTF-8, no control characters, no / or :"

// ValidGuestUserName says whether name can name a user in the guest (the user names of
// propagationMethod.qemuGuestAgent.users, and the keys of a userPassword Secret). Guests name users
// in many ways (user@domain, Windows names with spaces), so only what cannot be a name anywhere is
// refused: nothing, control characters, a path separator, the passwd file's separator.
func ValidGuestUserName(name string) bool {
	return name != "" && len(name) <= MaxGuestUserNameLength && utf8.ValidString(name) &&
		strings.IndexFunc(name, func(r rune) bool { return unicode.IsControl(r) || r == '/' || r == ':' }) < 0
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
				errs = append(errs, field.Invalid(up.Index(j), u, "not "+GuestUserNameRule))
			}
		}
	}
	if set != 1 {
		errs = append(errs, field.Invalid(mp, set, "set exactly one of noCloud, configDrive and qemuGuestAgent"))
	}
	return errs
}
