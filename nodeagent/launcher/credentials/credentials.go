// Package credentials turns an instance's accessCredentials and the Secrets they name into what the
// guest should hold (authorized keys per user, passwords), and keeps a guest in step with them
// through its guest agent: only what changed is sent, and keys it did not add are left alone.
// It reads Secrets as the launcher Pod has them (mounted files) and never talks to Kubernetes.
package credentials

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// Bounds of what a Secret may hand the guest; more is refused naming the Secret and the bound.
const (
	// MaxKeys is the most public keys one Secret may hold.
	MaxKeys = 256
	// MaxKeyLength is the longest public key line (an 16384-bit RSA key is about 2.8 KiB).
	MaxKeyLength = 16 << 10
	// MaxPasswordLength is the longest password.
	MaxPasswordLength = 1 << 10
)

// SecretLookup returns the data of the Secret with the given name.
type SecretLookup func(name string) (map[string][]byte, error)

// MountedSecrets reads Secrets from dir/<name>/<key>, as Secret volumes mounted there hold them
// (the kubelet's hidden ..data entries skipped).
func MountedSecrets(dir string) SecretLookup {
	return func(name string) (map[string][]byte, error) {
		entries, err := os.ReadDir(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("secret %s is not mounted in the launcher Pod: %w", name, err)
		}
		data := map[string][]byte{}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "..") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, name, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("read secret %s key %s: %w", name, e.Name(), err)
			}
			data[e.Name()] = b
		}
		return data, nil
	}
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
	out := map[string]string{}
	for user, pw := range data {
		switch {
		case !virtv1.ValidGuestUserName(user):
			return nil, fmt.Errorf("secret %s: key %q is not a user name", secret, user)
		case len(pw) == 0 || len(pw) > MaxPasswordLength:
			return nil, fmt.Errorf("secret %s key %s: a password of 1 to %d bytes", secret, user, MaxPasswordLength)
		case strings.ContainsAny(string(pw), "\x00\n"):
			return nil, fmt.Errorf("secret %s key %s: a password may not hold a NUL or a newline", secret, user)
		}
		out[user] = string(pw)
	}
	return out, nil
}

// Want is what the guest agent should put into the guest: keys per user, passwords per user.
type Want struct {
	Keys      map[string][]string
	Passwords map[string]string
}

// WantFor reads the Secrets of the credentials propagated through the guest agent.
func WantFor(creds []virtv1.AccessCredential, secrets SecretLookup) (Want, error) {
	w := Want{Keys: map[string][]string{}, Passwords: map[string]string{}}
	for i := range creds {
		c := &creds[i]
		if !c.ThroughAgent() {
			continue
		}
		name := c.SecretName()
		data, err := secrets(name)
		if err != nil {
			return Want{}, err
		}
		if c.SSHPublicKey != nil {
			keys, err := AuthorizedKeys(name, data)
			if err != nil {
				return Want{}, err
			}
			for _, u := range c.SSHPublicKey.PropagationMethod.QemuGuestAgent.Users {
				for _, k := range keys {
					if !slices.Contains(w.Keys[u], k) {
						w.Keys[u] = append(w.Keys[u], k)
					}
				}
			}
			continue
		}
		pws, err := Passwords(name, data)
		if err != nil {
			return Want{}, err
		}
		for u, pw := range pws {
			w.Passwords[u] = pw
		}
	}
	return w, nil
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
	AddAuthorizedKeys(ctx context.Context, user string, keys []string) error
	RemoveAuthorizedKeys(ctx context.Context, user string, keys []string) error
	SetPassword(ctx context.Context, user, password string) error
}

// Syncer remembers what it put into one guest, so that each Sync sends only the changes: keys added
// to the Secret are added, keys removed from it are removed (keys the guest's users added themselves
// stay), passwords are set when they change. Not safe for concurrent use.
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
	if len(w.Keys) != len(s.keys) {
		return false
	}
	for u, keys := range w.Keys {
		if !slices.Equal(keys, s.keys[u]) {
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

// Sync brings the guest to w. It goes on past a user that fails and returns every failure; what
// failed is tried again at the next Sync.
func (s *Syncer) Sync(ctx context.Context, a Agent, w Want) error {
	var errs []error
	users := map[string]bool{}
	for u := range w.Keys {
		users[u] = true
	}
	for u := range s.keys {
		users[u] = true
	}
	for _, u := range sortedKeys(users) {
		had, want := s.keys[u], w.Keys[u]
		var gone, added []string
		for _, k := range had {
			if !slices.Contains(want, k) {
				gone = append(gone, k)
			}
		}
		for _, k := range want {
			if !slices.Contains(had, k) {
				added = append(added, k)
			}
		}
		if len(gone) > 0 {
			if err := a.RemoveAuthorizedKeys(ctx, u, gone); err != nil {
				errs = append(errs, fmt.Errorf("remove keys of user %s: %w", u, err))
				continue
			}
		}
		if len(added) > 0 {
			if err := a.AddAuthorizedKeys(ctx, u, added); err != nil {
				errs = append(errs, fmt.Errorf("add keys for user %s: %w", u, err))
				s.keys[u] = slices.DeleteFunc(slices.Clone(had), func(k string) bool { return slices.Contains(gone, k) })
				continue
			}
		}
		if len(want) == 0 {
			delete(s.keys, u)
		} else {
			s.keys[u] = slices.Clone(want)
		}
	}
	for _, u := range sortedKeys(w.Passwords) {
		sum := sha256.Sum256([]byte(w.Passwords[u]))
		if s.passwords[u] == sum {
			continue
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
