package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// maxKeyFile bounds what --file reads: an authorized_keys line, with room.
const maxKeyFile = 64 << 10

// CredentialsOptions is `credentials add-ssh-key|remove-ssh-key|set-password VM`, as KubeVirt's
// virtctl: they edit the Secrets the VM's accessCredentials propagate through the guest agent (and,
// for the first key of a user, create one owned by the VM and add it to the VM); the launcher then
// puts the change into the running guest.
type CredentialsOptions struct {
	genericiooptions.IOStreams
	clientSource

	VM, User, Secret string
	// Key is the public key (--value, or --file's content), Password the password (--password).
	Key, File, Password        string
	CreateSecret, UpdateSecret bool
	Force                      bool

	c *clients
}

func newCredentialsCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "credentials",
		Short: "Manage the SSH keys and passwords of a virtual machine's accessCredentials (propagated through the guest agent)",
	}
	verb := func(use, short, example string, run func(*CredentialsOptions, context.Context) error, flags func(*cobra.Command, *CredentialsOptions)) *cobra.Command {
		o := &CredentialsOptions{IOStreams: streams, clientSource: clientSource{kube: kube}}
		c := &cobra.Command{
			Use: use + " VM", Short: short, Example: example, Args: cobra.ExactArgs(1),
			ValidArgsFunction: completeNames(kube, resourceVM),
			RunE: func(cmd *cobra.Command, args []string) error {
				o.VM = args[0]
				if err := o.Complete(); err != nil {
					return err
				}
				return run(o, cmd.Context())
			},
		}
		c.Flags().StringVarP(&o.User, "user", "u", "", "The guest user")
		c.Flags().StringVar(&o.Secret, "secret", "", "The Secret to change, when the VM has several for the user")
		c.Flags().BoolVar(&o.Force, "force", false, "Change a Secret the VM does not own, or a running VM")
		_ = c.MarkFlagRequired("user")
		flags(c, o)
		return c
	}
	keyFlags := func(c *cobra.Command, o *CredentialsOptions) {
		c.Flags().StringVarP(&o.File, "file", "f", "", "A file holding the public key")
		c.Flags().StringVar(&o.Key, "value", "", "The public key")
		c.MarkFlagsMutuallyExclusive("file", "value")
		c.MarkFlagsOneRequired("file", "value")
	}
	cmd.AddCommand(
		verb("add-ssh-key", "Add a public key to the VM's Secret for the user (creating the Secret for the first one)",
			"  virtctl credentials add-ssh-key my-vm --user fedora --file ~/.ssh/id_ed25519.pub",
			(*CredentialsOptions).AddKey, func(c *cobra.Command, o *CredentialsOptions) {
				keyFlags(c, o)
				c.Flags().BoolVar(&o.CreateSecret, "create-secret", false, "Create a new Secret for the key, even when the VM has one for the user")
				c.Flags().BoolVar(&o.UpdateSecret, "update-secret", false, "Add the key to an existing Secret; fail when there is none")
				c.MarkFlagsMutuallyExclusive("create-secret", "update-secret")
			}),
		verb("remove-ssh-key", "Remove a public key from the VM's Secrets for the user",
			"  virtctl credentials remove-ssh-key my-vm --user fedora --file ~/.ssh/id_ed25519.pub",
			(*CredentialsOptions).RemoveKey, keyFlags),
		verb("set-password", "Set the user's password in the VM's password Secret",
			"  virtctl credentials set-password my-vm --user fedora --password 'a long passphrase'",
			(*CredentialsOptions).SetPassword, func(c *cobra.Command, o *CredentialsOptions) {
				c.Flags().StringVarP(&o.Password, "password", "p", "", "The new password")
				_ = c.MarkFlagRequired("password")
			}),
	)
	return cmd
}

// Complete reads --file (bounded), and checks the user name, the key and the password.
func (o *CredentialsOptions) Complete() error {
	if !virtv1.ValidGuestUserName(o.User) {
		return fmt.Errorf("--user %q is not %s", o.User, virtv1.GuestUserNameRule)
	}
	if o.File != "" {
		f, err := os.Open(o.File)
		if err != nil {
			return fmt.Errorf("--file: %w", err)
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
		if err != nil {
			return fmt.Errorf("--file %s: %w", o.File, err)
		}
		if len(data) > maxKeyFile {
			return fmt.Errorf("--file %s: longer than %d bytes, not a public key", o.File, maxKeyFile)
		}
		o.Key = string(data)
	}
	o.Key = strings.TrimSpace(o.Key)
	if o.Key != "" {
		if strings.Contains(o.Key, "\n") {
			return errors.New("one public key at a time: the key holds several lines")
		}
		if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(o.Key)); err != nil {
			return fmt.Errorf("not a public key in authorized_keys format: %w", err)
		}
	}
	if strings.ContainsAny(o.Password, "\x00\n") || len(o.Password) > virtv1.MaxCredentialPasswordLength {
		return fmt.Errorf("--password: at most %d bytes, no NUL or newline", virtv1.MaxCredentialPasswordLength)
	}
	c, err := o.connect()
	if err != nil {
		return err
	}
	o.c = c
	return nil
}

// secretsOf are the Secrets of the VM's accessCredentials that the guest agent propagates for the
// user: SSH keys (passwords false) or passwords; only --secret when it is given.
func (o *CredentialsOptions) secretsOf(vm *virtv1.VirtualMachine, passwords bool) []string {
	var out []string
	for _, c := range vm.Spec.Template.Spec.AccessCredentials {
		name := c.SecretName()
		switch {
		case !c.ThroughAgent() || (o.Secret != "" && name != o.Secret) || slices.Contains(out, name):
		case passwords && c.UserPassword != nil:
			out = append(out, name)
		case !passwords && c.SSHPublicKey != nil && slices.Contains(c.SSHPublicKey.PropagationMethod.QemuGuestAgent.Users, o.User):
			out = append(out, name)
		}
	}
	return out
}

func (o *CredentialsOptions) getVM(ctx context.Context) (*virtv1.VirtualMachine, error) {
	vm := &virtv1.VirtualMachine{}
	if err := o.c.client.Get(ctx, client.ObjectKey{Namespace: o.c.namespace, Name: o.VM}, vm); err != nil {
		return nil, fmt.Errorf("get vm/%s: %w", o.VM, err)
	}
	if vm.Spec.Template == nil {
		return nil, fmt.Errorf("vm/%s has no template", o.VM)
	}
	return vm, nil
}

// owned checks that the VM owns the Secret (unless --force): a Secret shared with other VMs, or
// nobody's, is not changed by accident.
func (o *CredentialsOptions) owned(vm *virtv1.VirtualMachine, s *corev1.Secret) error {
	if o.Force {
		return nil
	}
	for _, ref := range s.OwnerReferences {
		if ref.Kind == "VirtualMachine" && ref.Name == vm.Name && ref.UID == vm.UID {
			return nil
		}
	}
	return fmt.Errorf("secret %s does not have an owner reference pointing to VM %s (--force changes it anyway)", s.Name, vm.Name)
}

// AddKey adds the key to the user's Secret, or creates one (owned by the VM, added to its
// accessCredentials) when the VM has none for the user or --create-secret says so.
func (o *CredentialsOptions) AddKey(ctx context.Context) error {
	vm, err := o.getVM(ctx)
	if err != nil {
		return err
	}
	secrets := o.secretsOf(vm, false)
	switch {
	case o.CreateSecret || (len(secrets) == 0 && !o.UpdateSecret):
		return o.createKeySecret(ctx, vm)
	case len(secrets) == 0:
		return fmt.Errorf("no secrets specified for user: %s", o.User)
	case len(secrets) > 1:
		return errors.New("multiple secrets specified, use option --secret to specify which secret to modify")
	}
	s, err := o.c.kube.CoreV1().Secrets(o.c.namespace).Get(ctx, secrets[0], metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("error getting secret %q: %w", secrets[0], err)
	}
	if want, _, _, _, _ := ssh.ParseAuthorizedKey([]byte(o.Key)); dropKey(s.DeepCopy(), want) > 0 {
		fmt.Fprintf(o.Out, "Secret %q already contains this SSH key.\n", s.Name)
		return nil
	}
	if err := o.owned(vm, s); err != nil {
		return err
	}
	if err := o.patchData(ctx, s, keyName(), o.Key); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "Successfully added the key to secret %q\n", s.Name)
	return nil
}

// patchData sets the Secret's data key to value with a JSON patch (creating data when it has none),
// conditional on the Secret being as read.
func (o *CredentialsOptions) patchData(ctx context.Context, s *corev1.Secret, key, value string) error {
	var ops []map[string]any
	if s.ResourceVersion != "" {
		ops = append(ops, map[string]any{"op": "test", "path": "/metadata/resourceVersion", "value": s.ResourceVersion})
	}
	if s.Data == nil {
		ops = append(ops, map[string]any{"op": "add", "path": "/data", "value": map[string][]byte{key: []byte(value)}})
	} else {
		ops = append(ops, map[string]any{"op": "add", "path": "/data/" + jsonPointerEscape.Replace(key), "value": []byte(value)})
	}
	patch, _ := json.Marshal(ops)
	if _, err := o.c.kube.CoreV1().Secrets(o.c.namespace).Patch(ctx, s.Name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("error patching secret %q: %w", s.Name, err)
	}
	return nil
}

// jsonPointerEscape escapes a key for a JSON patch path (RFC 6901).
var jsonPointerEscape = strings.NewReplacer("~", "~0", "/", "~1")

// createKeySecret creates a Secret holding the key, owned by the VM, and adds it to the VM's
// accessCredentials for the user; if the VM cannot be changed, the Secret is deleted again.
func (o *CredentialsOptions) createKeySecret(ctx context.Context, vm *virtv1.VirtualMachine) error {
	if vm.Status.Created && !o.Force {
		return fmt.Errorf("virtual machine %s is running. Use --force flag to update a running VM, it will take effect after restart", vm.Name)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName(vm.Name + "-ssh-key-"), Namespace: o.c.namespace, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: virtv1.GroupVersion.String(), Kind: "VirtualMachine", Name: vm.Name, UID: vm.UID, Controller: ptr.To(true),
		}}},
		Data: map[string][]byte{keyName(): []byte(o.Key)},
	}
	s, err := o.c.kube.CoreV1().Secrets(o.c.namespace).Create(ctx, s, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("error creating secret: %w", err)
	}
	cred := virtv1.AccessCredential{SSHPublicKey: &virtv1.SSHPublicKeyAccessCredential{
		Source: virtv1.SSHPublicKeyAccessCredentialSource{Secret: &virtv1.AccessCredentialSecretSource{SecretName: s.Name}},
		PropagationMethod: virtv1.SSHPublicKeyAccessCredentialPropagationMethod{
			QemuGuestAgent: &virtv1.QemuGuestAgentSSHPublicKeyAccessCredentialPropagation{Users: []string{o.User}},
		},
	}}
	// The test keeps a VM changed since it was read (another credential added) from losing its list.
	ops := []map[string]any{{"op": "test", "path": "/metadata/resourceVersion", "value": vm.ResourceVersion}}
	if vm.Spec.Template.Spec.AccessCredentials == nil {
		ops = append(ops, map[string]any{"op": "add", "path": "/spec/template/spec/accessCredentials", "value": []virtv1.AccessCredential{cred}})
	} else {
		ops = append(ops, map[string]any{"op": "add", "path": "/spec/template/spec/accessCredentials/-", "value": cred})
	}
	patch, _ := json.Marshal(ops)
	if err := o.c.client.Patch(ctx, vm, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		// The Secret goes again even when ctx ended (Ctrl-C): nothing is left half-made.
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := o.c.kube.CoreV1().Secrets(o.c.namespace).Delete(cleanup, s.Name, metav1.DeleteOptions{}); derr != nil && !apierrors.IsNotFound(derr) {
			return fmt.Errorf("error patching virtual machine: %w (and secret %s, created for it, could not be deleted: %v)", err, s.Name, derr)
		}
		return fmt.Errorf("error patching virtual machine: %w", err)
	}
	fmt.Fprintf(o.Out, "Successfully created secret %q with the key and added it to vm/%s for user %s\n", s.Name, vm.Name, o.User)
	return nil
}

// RemoveKey removes the key from every Secret of the user (or --secret): the lines holding the same
// public key, whatever their options and comment. Every Secret's owner is checked before any is
// changed; finding the key nowhere is an error.
func (o *CredentialsOptions) RemoveKey(ctx context.Context) error {
	vm, err := o.getVM(ctx)
	if err != nil {
		return err
	}
	names := o.secretsOf(vm, false)
	if len(names) == 0 {
		if o.Secret != "" {
			return fmt.Errorf("secret %s is not associated with user %s", o.Secret, o.User)
		}
		fmt.Fprintf(o.Out, "No secrets associated with user %s\n", o.User)
		return nil
	}
	want, _, _, _, _ := ssh.ParseAuthorizedKey([]byte(o.Key)) // Complete checked it
	api := o.c.kube.CoreV1().Secrets(o.c.namespace)
	for _, name := range names {
		s, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("error getting secret %q: %w", name, err)
		}
		if err == nil {
			if err := o.owned(vm, s); err != nil {
				return err
			}
		}
	}
	removed := 0
	for _, name := range names {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			s, err := api.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("error getting secret %q: %w", name, err)
			}
			n := dropKey(s, want)
			if n == 0 {
				return nil
			}
			if _, err := api.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
				return err
			}
			removed += n
			return nil
		})
		if err != nil {
			return fmt.Errorf("error updating secret %q: %w", name, err)
		}
	}
	if removed == 0 {
		return fmt.Errorf("the key is in none of the secrets of user %s (%s)", o.User, strings.Join(names, ", "))
	}
	fmt.Fprintf(o.Out, "Successfully removed the key from the secrets of user %s\n", o.User)
	return nil
}

// dropKey removes from the Secret's values the lines holding the public key want (and blank lines
// of the values it changes), deletes values left empty, and returns how many lines went.
func dropKey(s *corev1.Secret, want ssh.PublicKey) int {
	removed := 0
	for k, v := range s.Data {
		lines := strings.Split(string(v), "\n")
		kept := slices.DeleteFunc(slices.Clone(lines), func(l string) bool {
			pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(l))
			return err == nil && bytes.Equal(pk.Marshal(), want.Marshal())
		})
		if len(kept) == len(lines) {
			continue
		}
		removed += len(lines) - len(kept)
		kept = slices.DeleteFunc(kept, func(l string) bool { return strings.TrimSpace(l) == "" })
		if len(kept) == 0 {
			delete(s.Data, k)
		} else {
			s.Data[k] = []byte(strings.Join(kept, "\n"))
		}
	}
	return removed
}

// SetPassword sets the user's password in the VM's password Secret (or --secret).
func (o *CredentialsOptions) SetPassword(ctx context.Context) error {
	if o.Password == "" {
		return errors.New("--password may not be empty")
	}
	vm, err := o.getVM(ctx)
	if err != nil {
		return err
	}
	secrets := o.secretsOf(vm, true)
	switch {
	case len(secrets) == 0 && o.Secret != "":
		return fmt.Errorf("secret %s was not assigned", o.Secret)
	case len(secrets) == 0:
		return errors.New("no secrets assigned to UserPassword AccessCredentials")
	case len(secrets) > 1:
		return errors.New("multiple secrets specified, use option --secret to specify which secret to modify")
	}
	api := o.c.kube.CoreV1().Secrets(o.c.namespace)
	s, err := api.Get(ctx, secrets[0], metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("error getting secret %q: %w", secrets[0], err)
	}
	if err := o.owned(vm, s); err != nil {
		return err
	}
	if err := o.patchData(ctx, s, o.User, o.Password); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "Successfully set password in secret %q\n", s.Name)
	return nil
}

// keyName is a new data key for a public key in a Secret: ssh-key- and 6 random characters.
func keyName() string { return "ssh-key-" + utilrand.String(6) }

// secretName is prefix and 5 random characters (as generateName does), the prefix cut so the name
// fits a Secret's 253 characters.
func secretName(prefix string) string {
	const maxPrefix = validation.DNS1123SubdomainMaxLength - 5
	if len(prefix) > maxPrefix {
		prefix = prefix[:maxPrefix]
	}
	return prefix + utilrand.String(5)
}
