package credentials

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

func TestAuthorizedKeys(t *testing.T) {
	keys, err := AuthorizedKeys("s", map[string][]byte{
		"b": []byte("ssh-ed25519 AAAB two\n\n# a comment\nssh-ed25519 AAAA one\n"),
		"a": []byte("  ssh-ed25519 AAAA one  "),
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"ssh-ed25519 AAAA one", "ssh-ed25519 AAAB two"}, keys, "in key order, each once, trimmed")

	for name, data := range map[string]string{
		"a control character": "ssh-ed25519 AAAA\x1b[2J",
		"one field":           "AAAA",
		"too long":            "ssh-rsa " + strings.Repeat("A", MaxKeyLength),
		"too many": strings.Repeat("ssh-ed25519 K", 1) + func() string {
			var b strings.Builder
			for i := 0; i <= MaxKeys; i++ {
				fmt.Fprintf(&b, "\nssh-ed25519 K%d", i)
			}
			return b.String()
		}(),
	} {
		_, err := AuthorizedKeys("s", map[string][]byte{"k": []byte(data)})
		assert.Error(t, err, name)
	}
}

func TestPasswords(t *testing.T) {
	pws, err := Passwords("s", map[string][]byte{"fedora": []byte("pw 1")})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"fedora": "pw 1"}, pws)
	for name, data := range map[string]map[string][]byte{
		"a user that is a path": {"../root": []byte("x")},
		"a user with a colon":   {"root:0": []byte("x")},
		"empty":                 {"root": nil},
		"a newline":             {"root": []byte("a\nroot2:x")},
		"too long":              {"root": []byte(strings.Repeat("p", virtv1.MaxCredentialPasswordLength+1))},
	} {
		_, err := Passwords("s", data)
		assert.Error(t, err, name)
	}
}

func TestMountedSecretsAndWant(t *testing.T) {
	dir := t.TempDir()
	write := func(secret, key, value string) {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, secret), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, secret, key), []byte(value), 0o600))
	}
	write("keys", "k1", "ssh-ed25519 AAAA one")
	write("keys", "..data", "ignored: the kubelet's")
	write("pass", "fedora", "s3cret")
	creds := []virtv1.AccessCredential{
		{SSHPublicKey: &virtv1.SSHPublicKeyAccessCredential{Source: virtv1.SSHPublicKeyAccessCredentialSource{Secret: &virtv1.AccessCredentialSecretSource{SecretName: "keys"}},
			PropagationMethod: virtv1.SSHPublicKeyAccessCredentialPropagationMethod{QemuGuestAgent: &virtv1.QemuGuestAgentSSHPublicKeyAccessCredentialPropagation{Users: []string{"fedora", "root"}}}}},
		{SSHPublicKey: &virtv1.SSHPublicKeyAccessCredential{Source: virtv1.SSHPublicKeyAccessCredentialSource{Secret: &virtv1.AccessCredentialSecretSource{SecretName: "cloud"}},
			PropagationMethod: virtv1.SSHPublicKeyAccessCredentialPropagationMethod{NoCloud: &virtv1.NoCloudSSHPublicKeyAccessCredentialPropagation{}}}},
		{UserPassword: &virtv1.UserPasswordAccessCredential{Source: virtv1.UserPasswordAccessCredentialSource{Secret: &virtv1.AccessCredentialSecretSource{SecretName: "pass"}},
			PropagationMethod: virtv1.UserPasswordAccessCredentialPropagationMethod{QemuGuestAgent: &virtv1.QemuGuestAgentUserPasswordAccessCredentialPropagation{}}}},
	}
	w, err := WantFor(creds, MountedSecrets(dir))
	require.NoError(t, err, "the cloud-init Secret is not read for the agent")
	assert.Equal(t, Want{Keys: map[string][]string{"fedora": {"ssh-ed25519 AAAA one"}, "root": {"ssh-ed25519 AAAA one"}},
		Passwords: map[string]string{"fedora": "s3cret"}, Held: map[string]bool{}}, w)

	write("pass", "root", "two\nlines")
	w, err = WantFor(creds, MountedSecrets(dir))
	assert.ErrorContains(t, err, "secret pass key root", "a bad password Secret is reported")
	assert.Len(t, w.Keys, 2, "and holds nothing else back")
	require.NoError(t, os.Remove(filepath.Join(dir, "pass", "root")))

	write("big", "a", strings.Repeat("k", corev1.MaxSecretSize/2))
	write("big", "b", strings.Repeat("k", corev1.MaxSecretSize/2+1))
	_, err = MountedSecrets(dir)("big")
	assert.ErrorContains(t, err, "more than a Secret holds", "a mount holding more than a Secret can is not read")

	_, err = CloudInitKeys(creds, false, MountedSecrets(dir))
	assert.ErrorContains(t, err, "secret cloud is not mounted", "the noCloud Secret is read for the seed")
	write("cloud", "k", "ssh-rsa BBBB cloud")
	keys, err := CloudInitKeys(creds, false, MountedSecrets(dir))
	require.NoError(t, err)
	assert.Equal(t, []string{"ssh-rsa BBBB cloud"}, keys)
	keys, err = CloudInitKeys(creds, true, MountedSecrets(dir))
	require.NoError(t, err)
	assert.Empty(t, keys, "no configDrive credential")
}

// fakeAgent records what a Syncer sends; failUser makes every call for that user fail.
type fakeAgent struct {
	calls    []string
	failUser string
}

func (f *fakeAgent) call(what, user string, v any) error {
	f.calls = append(f.calls, fmt.Sprintf("%s %s %v", what, user, v))
	if user == f.failUser {
		return errors.New("refused")
	}
	return nil
}

func (f *fakeAgent) SetAuthorizedKeys(_ context.Context, user string, keys []string) error {
	return f.call("set", user, keys)
}

func (f *fakeAgent) RemoveAuthorizedKeys(_ context.Context, user string, keys []string) error {
	return f.call("remove", user, keys)
}

func (f *fakeAgent) SetPassword(_ context.Context, user, pw string) error {
	return f.call("password", user, pw)
}

func TestSyncerSendsOnlyChanges(t *testing.T) {
	ctx := context.Background()
	s := NewSyncer()
	a := &fakeAgent{}
	w1 := Want{Keys: map[string][]string{"fedora": {"k1", "k2"}}, Passwords: map[string]string{"fedora": "p1"}}
	assert.False(t, s.InStep(w1))
	require.NoError(t, s.Sync(ctx, a, w1))
	assert.Equal(t, []string{"set fedora [k1 k2]", "password fedora p1"}, a.calls)
	assert.True(t, s.InStep(w1))

	a.calls = nil
	require.NoError(t, s.Sync(ctx, a, w1))
	assert.Empty(t, a.calls, "nothing changed, nothing sent")

	a.calls = nil
	w2 := Want{Keys: map[string][]string{"fedora": {"k2", "k3"}, "root": {"k9"}}, Passwords: map[string]string{"fedora": "p2"}}
	require.NoError(t, s.Sync(ctx, a, w2))
	assert.Equal(t, []string{"set fedora [k2 k3]", "set root [k9]", "password fedora p2"}, a.calls, "a changed user's file is replaced")

	a.calls = nil
	w3 := Want{Keys: map[string][]string{"fedora": {}}, Passwords: map[string]string{}}
	require.NoError(t, s.Sync(ctx, a, w3))
	assert.Equal(t, []string{"set fedora []", "remove root [k9]"}, a.calls, "an emptied Secret empties the file; a user no longer named loses the keys it was given")
	assert.True(t, s.InStep(w3))

	a.calls = nil
	require.NoError(t, NewSyncer().Sync(ctx, a, w3))
	assert.Equal(t, []string{"set fedora []"}, a.calls, "a new launcher sets every user again")
}

// A Secret that cannot be read holds back its own users only; a failed call is tried again.
func TestSyncerHoldsAndRetries(t *testing.T) {
	ctx := context.Background()
	s := NewSyncer()
	a := &fakeAgent{}
	require.NoError(t, s.Sync(ctx, a, Want{Keys: map[string][]string{"fedora": {"k1"}, "root": {"k2"}}}))
	a.calls = nil
	held := Want{Keys: map[string][]string{"root": {}}, Held: map[string]bool{"fedora": true}}
	require.NoError(t, s.Sync(ctx, a, held))
	assert.Equal(t, []string{"set root []"}, a.calls, "fedora's keys stay while its Secret is unreadable; root's revocation goes on")
	assert.True(t, s.InStep(held))

	s, a = NewSyncer(), &fakeAgent{failUser: "root"}
	w := Want{Keys: map[string][]string{"fedora": {"k1"}, "root": {"k1"}}, Passwords: map[string]string{"root": "p"}}
	err := s.Sync(ctx, a, w)
	assert.ErrorContains(t, err, "set the keys of user root: refused")
	assert.ErrorContains(t, err, "set the password of user root: refused")
	assert.False(t, s.InStep(w))
	a.failUser, a.calls = "", nil
	require.NoError(t, s.Sync(ctx, a, w))
	assert.Equal(t, []string{"set root [k1]", "password root p"}, a.calls, "only what failed is sent again")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, NewSyncer().Sync(cancelled, a, w), context.Canceled, "a deadline stops the pass")
}
