package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	podvirtscheme "github.com/podvirt/podvirt/internal/scheme"
)

const (
	testKey1 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGvDbVQjkyi2nDmA1NaYz6XjZTJSOzqgR5Z5FaWNbTeQ one@example"
	testKey2 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBGaeB7dy1vBRPJVCZ4L5vxGnD9DmFgb+f6B9/0jQvQ6 two@example"
)

// credentials add-ssh-key creates a Secret owned by the VM for a user's first key and adds it to the
// VM; later keys go into that Secret; remove-ssh-key takes them out; set-password writes the password
// Secret; a Secret the VM does not own is changed only with --force.
func TestCredentials(t *testing.T) {
	vm := &virtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "vm1", UID: types.UID("vm-uid")},
		Spec:       virtv1.VirtualMachineSpec{Template: &virtv1.VirtualMachineInstanceTemplateSpec{}},
	}
	c := fake.NewClientBuilder().WithScheme(podvirtscheme.New()).WithObjects(vm).Build()
	kube := kubefake.NewClientset()
	run := func(verb func(*CredentialsOptions) error, o *CredentialsOptions) (string, error) {
		streams, _, out, _ := genericiooptions.NewTestIOStreams()
		o.IOStreams, o.VM = streams, "vm1"
		o.factory = func() (*clients, error) { return &clients{namespace: "ns1", client: c, kube: kube}, nil }
		if err := o.Complete(); err != nil {
			return out.String(), err
		}
		err := verb(o)
		return out.String(), err
	}
	add := func(o *CredentialsOptions) error { return o.AddKey(t.Context()) }
	remove := func(o *CredentialsOptions) error { return o.RemoveKey(t.Context()) }
	setPassword := func(o *CredentialsOptions) error { return o.SetPassword(t.Context()) }
	secrets := func() []corev1.Secret {
		l, err := kube.CoreV1().Secrets("ns1").List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
		return l.Items
	}
	getVM := func() *virtv1.VirtualMachine {
		got := &virtv1.VirtualMachine{}
		require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: "ns1", Name: "vm1"}, got))
		return got
	}

	keyFile := filepath.Join(t.TempDir(), "id.pub")
	require.NoError(t, os.WriteFile(keyFile, []byte(testKey1+"\n"), 0o600))
	out, err := run(add, &CredentialsOptions{User: "fedora", File: keyFile})
	require.NoError(t, err)
	assert.Contains(t, out, "Successfully created secret")
	require.Len(t, secrets(), 1)
	s := secrets()[0]
	assert.True(t, strings.HasPrefix(s.Name, "vm1-ssh-key-"), s.Name)
	assert.Equal(t, types.UID("vm-uid"), s.OwnerReferences[0].UID)
	creds := getVM().Spec.Template.Spec.AccessCredentials
	require.Len(t, creds, 1)
	assert.Equal(t, s.Name, creds[0].SecretName())
	assert.Equal(t, []string{"fedora"}, creds[0].SSHPublicKey.PropagationMethod.QemuGuestAgent.Users)

	out, err = run(add, &CredentialsOptions{User: "fedora", Key: testKey1})
	require.NoError(t, err)
	assert.Equal(t, "Secret \""+s.Name+"\" already contains this SSH key.\n", out, "the file's newline does not make it another key")
	_, err = run(add, &CredentialsOptions{User: "fedora", Key: testKey2})
	require.NoError(t, err)
	require.Len(t, secrets(), 1)
	assert.Len(t, secrets()[0].Data, 2)

	_, err = run(remove, &CredentialsOptions{User: "fedora", Key: strings.Replace(testKey1, "one@example", "another-comment", 1)})
	require.NoError(t, err, "the same key with another comment is the same key")
	data := secrets()[0].Data
	require.Len(t, data, 1)
	for _, v := range data {
		assert.Equal(t, testKey2, string(v))
	}
	out, err = run(remove, &CredentialsOptions{User: "root", Key: testKey1})
	require.NoError(t, err)
	assert.Equal(t, "No secrets associated with user root\n", out)
	_, err = run(remove, &CredentialsOptions{User: "fedora", Key: testKey1})
	assert.ErrorContains(t, err, "the key is in none of the secrets of user fedora", "removing what is not there says so")

	_, err = run(add, &CredentialsOptions{User: "fedora", Key: "ssh-ed25519 not-base64"})
	assert.ErrorContains(t, err, "not a public key")
	_, err = run(add, &CredentialsOptions{User: "../root", Key: testKey1})
	assert.ErrorContains(t, err, "--user")

	_, err = run(setPassword, &CredentialsOptions{User: "fedora", Password: "pw"})
	assert.EqualError(t, err, "no secrets assigned to UserPassword AccessCredentials")
	_, err = kube.CoreV1().Secrets("ns1").Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "shared"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	v := getVM()
	v.Spec.Template.Spec.AccessCredentials = append(v.Spec.Template.Spec.AccessCredentials, virtv1.AccessCredential{UserPassword: &virtv1.UserPasswordAccessCredential{
		Source:            virtv1.UserPasswordAccessCredentialSource{Secret: &virtv1.AccessCredentialSecretSource{SecretName: "shared"}},
		PropagationMethod: virtv1.UserPasswordAccessCredentialPropagationMethod{QemuGuestAgent: &virtv1.QemuGuestAgentUserPasswordAccessCredentialPropagation{}},
	}})
	require.NoError(t, c.Update(t.Context(), v))
	_, err = run(setPassword, &CredentialsOptions{User: "fedora", Password: "pw"})
	assert.ErrorContains(t, err, "secret shared does not have an owner reference pointing to VM vm1")
	out, err = run(setPassword, &CredentialsOptions{User: "fedora", Password: "pw", Force: true})
	require.NoError(t, err)
	assert.Equal(t, "Successfully set password in secret \"shared\"\n", out)
	got, err := kube.CoreV1().Secrets("ns1").Get(t.Context(), "shared", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "pw", string(got.Data["fedora"]))

	v = getVM()
	v.Status.Created = true
	require.NoError(t, c.Update(t.Context(), v))
	_, err = run(add, &CredentialsOptions{User: "root", Key: testKey1})
	assert.ErrorContains(t, err, "virtual machine vm1 is running. Use --force flag")
}
