// Package credentials turns an instance's accessCredentials and the Secrets they name into what the
// guest should hold (authorized keys per user, passwords), and keeps a guest in step with them
// through its guest agent, as KubeVirt does: a user named by a credential has exactly the keys of
// its Secrets in authorized_keys (the file is replaced), a password is set when it changes.
// It reads Secrets as the launcher Pod has them (mounted files) and never talks to Kubernetes.
package credentials

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// Bounds of what a Secret may hand the guest; more is refused naming the Secret and the bound.
const (
	// MaxKeys is the most public keys one Secret may hold.
	MaxKeys = 256
	// MaxKeyLength is the longest public key line (an 16384-bit RSA key is about 2.8 KiB).
	MaxKeyLength = 16 << 10
)

// SecretLookup returns the data of the Secret with the given name.
type SecretLookup func(name string) (map[string][]byte, error)

// MountedSecrets reads Secrets from dir/<name>/<key>, as Secret volumes mounted there hold them
// (the kubelet's hidden ..data entries skipped), each at most corev1.MaxSecretSize bytes in all, as
// the API holds them: a mount that says more is refused, not read.
func MountedSecrets(dir string) SecretLookup {
	return func(name string) (map[string][]byte, error) {
		entries, err := os.ReadDir(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("secret %s is not mounted in the launcher Pod: %w", name, err)
		}
		data, left := map[string][]byte{}, int64(corev1.MaxSecretSize)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "..") {
				continue
			}
			b, err := readUpTo(filepath.Join(dir, name, e.Name()), left)
			if err != nil {
				return nil, fmt.Errorf("read secret %s key %s: %w", name, e.Name(), err)
			}
			data[e.Name()], left = b, left-int64(len(b))
		}
		return data, nil
	}
}

// readUpTo reads the file at path, failing when it holds more than limit bytes.
func readUpTo(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("more than a Secret holds (%d bytes in all)", corev1.MaxSecretSize)
	}
	return b, err
}

// AuthorizedKeys are the public keys in a Secret's data: every non-empty line of every value that is
// not a comment, in key order, each once.
func AuthorizedKeys(secret string, data map[string][]byte) ([]string, error) {
	names := make([]string, 0, len(data))
	for k := range data {
		names = append(names, k)
	}
	slices.Sort(names)
	var keys []string
	for _, k := range names {
		for _, line := range strings.Split(string(data[k]), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") || slices.Contains(keys, line) {
				continue
			}
			switch {
			case len(line) > MaxKeyLength:
				return nil, fmt.Errorf("secret %s key %s: a public key longer than %d bytes", secret, k, MaxKeyLength)
			case strings.IndexFunc(line, unicode.IsControl) >= 0 || len(strings.Fields(line)) < 2:
				return nil, fmt.Errorf("secret %s key %s: not a public key in authorized_keys format (TYPE BASE64 [COMMENT])", secret, k)
			}
			keys = append(keys, line)
			if len(keys) > MaxKeys {
				return nil, fmt.Errorf("secret %s: more than %d public keys", secret, MaxKeys)
			}
		}
	}
	return keys, nil
}

// Passwords are a userPassword Secret's data: user name → password.
func Passwords(secret string, data map[string][]byte) (map[string]string, error) {
	if len(data) > virtv1.MaxCredentialUsers {
		return nil, fmt.Errorf("secret %s: passwords of more than %d users", secret, virtv1.MaxCredentialUsers)
	}
	out := map[string]string{}
	for user, pw := range data {
		switch {
		case !virtv1.ValidGuestUserName(user):
			return nil, fmt.Errorf("secret %s: key %q is not %s", secret, user, virtv1.GuestUserNameRule)
		case len(pw) == 0 || len(pw) > virtv1.MaxCredentialPasswordLength:
			return nil, fmt.Errorf("secret %s key %s: a password of 1 to %d bytes", secret, user, virtv1.MaxCredentialPasswordLength)
		case strings.ContainsAny(string(pw), "\x00\n"):
			return nil, fmt.Errorf("secret %s key %s: a password may not hold a NUL or a newline", secret, user)
		}
		out[user] = string(pw)
	}
	return out, nil
}

// Want is what the guest agent should put into the guest: keys per user, passwords per user. Held
// users are named by a credential whose Secret could not be read: their keys are left as they are.
type Want struct {
	Keys      map[string][]string
	Passwords map[string]string
	Held      map[string]bool
}

// WantFor reads the Secrets of the credentials propagated through the guest agent. A Secret that
// cannot be read, or holds what is not a key or a password, is reported in the error and holds
// back only its own users: the other credentials are still wanted (a revocation elsewhere goes on).
func WantFor(creds []virtv1.AccessCredential, secrets SecretLookup) (Want, error) {
	w := Want{Keys: map[string][]string{}, Passwords: map[string]string{}, Held: map[string]bool{}}
	var errs []error
	for i := range creds {
		c := &creds[i]
		name := c.SecretName()
		switch {
		case c.SSHPublicKey != nil && c.SSHPublicKey.PropagationMethod.QemuGuestAgent != nil:
			users := c.SSHPublicKey.PropagationMethod.QemuGuestAgent.Users
			data, err := secrets(name)
			var keys []string
			if err == nil {
				keys, err = AuthorizedKeys(name, data)
			}
			if err != nil {
				errs = append(errs, err)
				for _, u := range users {
					w.Held[u] = true
				}
				continue
			}
			for _, u := range users {
				if w.Keys[u] == nil {
					w.Keys[u] = []string{} // no keys is a state too: an emptied Secret empties the file
				}
				for _, k := range keys {
					if !slices.Contains(w.Keys[u], k) {
						w.Keys[u] = append(w.Keys[u], k)
					}
				}
			}
		case c.UserPassword != nil && c.UserPassword.PropagationMethod.QemuGuestAgent != nil:
			data, err := secrets(name)
			var pws map[string]string
			if err == nil {
				pws, err = Passwords(name, data)
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for u, pw := range pws {
				w.Passwords[u] = pw
			}
		}
	}
	for u := range w.Held {
		delete(w.Keys, u)
	}
	return w, errors.Join(errs...)
}

// CloudInitKeys are the keys of the sshPublicKey credentials propagated by cloud-init: noCloud ones
// when configDrive is false, configDrive ones when it is true.
func CloudInitKeys(creds []virtv1.AccessCredential, configDrive bool, secrets SecretLookup) ([]string, error) {
	var out []string
	for i := range creds {
		c := creds[i].SSHPublicKey
		if c == nil || (configDrive && c.PropagationMethod.ConfigDrive == nil) || (!configDrive && c.PropagationMethod.NoCloud == nil) {
			continue
		}
		name := creds[i].SecretName()
		data, err := secrets(name)
		if err != nil {
			return nil, err
		}
		keys, err := AuthorizedKeys(name, data)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out, nil
}

// Agent is what the guest agent does for a Syncer.
type Agent interface {
	// SetAuthorizedKeys replaces the user's authorized_keys with keys.
	SetAuthorizedKeys(ctx context.Context, user string, keys []string) error
	// RemoveAuthorizedKeys removes keys from the user's authorized_keys.
	RemoveAuthorizedKeys(ctx context.Context, user string, keys []string) error
	SetPassword(ctx context.Context, user, password string) error
}

// Syncer remembers what it put into one guest, so that each Sync sends only the changes: a user's
// keys are set when they differ from what it last set, the keys of a user no longer named are
// removed, passwords are set when they change. A new Syncer (a new launcher, or the periodic full
// resync) sets everything again, so a key removed from a Secret while no launcher ran leaves the
// guest too. Not safe for concurrent use.
type Syncer struct {
	keys      map[string][]string
	passwords map[string][sha256.Size]byte
}

// NewSyncer is a Syncer that has put nothing into the guest yet.
func NewSyncer() *Syncer {
	return &Syncer{keys: map[string][]string{}, passwords: map[string][sha256.Size]byte{}}
}

// InStep says whether the guest already holds w, as far as this Syncer put it there.
func (s *Syncer) InStep(w Want) bool {
	for u, keys := range w.Keys {
		if had, ok := s.keys[u]; !ok || !slices.Equal(keys, had) {
			return false
		}
	}
	for u := range s.keys {
		if _, ok := w.Keys[u]; !ok && !w.Held[u] {
			return false
		}
	}
	for u, pw := range w.Passwords {
		if s.passwords[u] != sha256.Sum256([]byte(pw)) {
			return false
		}
	}
	return true
}

// Sync brings the guest to w. It goes on past a user that fails and returns every failure (what
// failed is tried again at the next Sync); it stops when ctx ends, so a slow agent cannot hold it.
func (s *Syncer) Sync(ctx context.Context, a Agent, w Want) error {
	var errs []error
	for _, u := range sortedKeys(w.Keys) {
		if had, ok := s.keys[u]; ok && slices.Equal(had, w.Keys[u]) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		if err := a.SetAuthorizedKeys(ctx, u, w.Keys[u]); err != nil {
			errs = append(errs, fmt.Errorf("set the keys of user %s: %w", u, err))
			delete(s.keys, u) // unknown now: set again next time
			continue
		}
		s.keys[u] = slices.Clone(w.Keys[u])
	}
	for _, u := range sortedKeys(s.keys) {
		if _, ok := w.Keys[u]; ok || w.Held[u] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		if err := a.RemoveAuthorizedKeys(ctx, u, s.keys[u]); err != nil {
			errs = append(errs, fmt.Errorf("remove the keys of user %s: %w", u, err))
			continue
		}
		delete(s.keys, u)
	}
	for _, u := range sortedKeys(w.Passwords) {
		sum := sha256.Sum256([]byte(w.Passwords[u]))
		if s.passwords[u] == sum {
			continue
		}
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		if err := a.SetPassword(ctx, u, w.Passwords[u]); err != nil {
			errs = append(errs, fmt.Errorf("set the password of user %s: %w", u, err))
			continue
		}
		s.passwords[u] = sum
	}
	return errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
