//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// TestFedoraLikeCredentialsSSHAndSCP boots the Fedora-like guest with three accessCredentials: an SSH
// key through cloud-init (noCloud, for the default user fedora), another through the guest agent for
// root, and fedora's password through the agent. virtctl ssh and scp log in with each key (the local
// ssh client against the guest's sshd); the password is the one the guest checks; `virtctl
// credentials` adds a key and removes one in the agent's Secret, and the running guest follows, with
// fedora's keys (not the agent's to manage) untouched.
func TestFedoraLikeCredentialsSSHAndSCP(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	dir := t.TempDir()
	cloudKey, agentKey, laterKey := sshKey(t, dir, "cloud"), sshKey(t, dir, "agent"), sshKey(t, dir, "later")
	const password = "Podvirt-e2e-passphrase"
	f.Create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "keys-cloud"}, StringData: map[string]string{"key": pub(t, cloudKey)}})
	f.Create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "keys-agent"}, StringData: map[string]string{"key": pub(t, agentKey)}})
	f.Create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "passwords"}, StringData: map[string]string{"fedora": password}})
	f.Create(fedoraLikeVM(f.Namespace, "fedora"))

	began := time.Now()
	if out, code := virtctl(t, f, "", "start", "fedora", "--wait", "--for", "agent", "--timeout", "6m"); code != 0 {
		t.Fatalf("start --wait --for agent: exit %d, output:\n%s", code, tail(out, 20))
	}
	t.Logf("start → guest agent connected: %s", time.Since(began).Round(100*time.Millisecond))
	f.Eventually("AccessCredentialsSynchronized", 2*time.Minute, func(ctx context.Context) (bool, error) {
		vmi := &virtv1.VirtualMachineInstance{}
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: "fedora"}, vmi); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(vmi.Status.Conditions, virtv1.VirtualMachineInstanceAccessCredentialsSynchronized), nil
	})

	guestSideNIC(t, f)
	objectGraph(t, f)
	waitSSH(t, f, "fedora", cloudKey, true)
	waitSSH(t, f, "root", agentKey, true)
	scpRoundTrip(t, f, agentKey, dir)
	check := `import crypt, sys; h = [l.split(":")[1] for l in open("/etc/shadow") if l.startswith("fedora:")][0]; sys.exit(0 if crypt.crypt(sys.argv[1], h) == h else 3)`
	if out, code := virtctl(t, f, "", "exec", "fedora", "--", "python3", "-W", "ignore", "-c", check, password); code != 0 {
		t.Errorf("fedora's password is not the Secret's: exit %d, output:\n%s", code, out)
	}

	// The agent's Secret changes under the running guest (--force: the test made it, the VM does not own it).
	if out, code := virtctl(t, f, "", "credentials", "add-ssh-key", "fedora", "--user", "root", "--file", laterKey+".pub",
		"--update-secret", "--secret", "keys-agent", "--force"); code != 0 {
		t.Fatalf("credentials add-ssh-key: exit %d, output:\n%s", code, out)
	}
	if out, code := virtctl(t, f, "", "credentials", "remove-ssh-key", "fedora", "--user", "root", "--file", agentKey+".pub", "--force"); code != 0 {
		t.Fatalf("credentials remove-ssh-key: exit %d, output:\n%s", code, out)
	}
	changed := time.Now()
	waitSSH(t, f, "root", laterKey, true)
	waitSSH(t, f, "root", agentKey, false)
	t.Logf("Secret changed → the guest's authorized_keys followed: %s", time.Since(changed).Round(time.Second))
	waitSSH(t, f, "fedora", cloudKey, true) // fedora is named by no agent credential: its keys stay

	if out, code := virtctl(t, f, "", "stop", "fedora", "--wait", "--timeout", "3m"); code != 0 {
		t.Fatalf("stop --wait: exit %d, output:\n%s", code, tail(out, 20))
	}
}

// fedoraLikeVM is a halted VM of the Fedora-like guest with a cloud-init seed and the test's credentials.
func fedoraLikeVM(ns, name string) *virtv1.VirtualMachine {
	vm := kernelBootVM(ns, name, virtv1.RunStrategyHalted)
	spec := &vm.Spec.Template.Spec
	spec.TerminationGracePeriodSeconds = ptr.To[int64](60)
	spec.Domain.Firmware = nil
	spec.Domain.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("544Mi")
	spec.Domain.Devices.Disks = []virtv1.Disk{
		{Name: "rootdisk", Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}},
		{Name: "cloudinit", Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}},
	}
	spec.Volumes = []virtv1.Volume{
		{Name: "rootdisk", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: framework.Image("fedora-with-test-tooling-container-disk")}}},
		{Name: "cloudinit", VolumeSource: virtv1.VolumeSource{CloudInitNoCloud: &virtv1.CloudInitNoCloudSource{UserData: "#cloud-config\n"}}},
	}
	secret := func(name string) *virtv1.AccessCredentialSecretSource {
		return &virtv1.AccessCredentialSecretSource{SecretName: name}
	}
	spec.AccessCredentials = []virtv1.AccessCredential{
		{SSHPublicKey: &virtv1.SSHPublicKeyAccessCredential{Source: virtv1.SSHPublicKeyAccessCredentialSource{Secret: secret("keys-cloud")},
			PropagationMethod: virtv1.SSHPublicKeyAccessCredentialPropagationMethod{NoCloud: &virtv1.NoCloudSSHPublicKeyAccessCredentialPropagation{}}}},
		{SSHPublicKey: &virtv1.SSHPublicKeyAccessCredential{Source: virtv1.SSHPublicKeyAccessCredentialSource{Secret: secret("keys-agent")},
			PropagationMethod: virtv1.SSHPublicKeyAccessCredentialPropagationMethod{QemuGuestAgent: &virtv1.QemuGuestAgentSSHPublicKeyAccessCredentialPropagation{Users: []string{"root"}}}}},
		{UserPassword: &virtv1.UserPasswordAccessCredential{Source: virtv1.UserPasswordAccessCredentialSource{Secret: secret("passwords")},
			PropagationMethod: virtv1.UserPasswordAccessCredentialPropagationMethod{QemuGuestAgent: &virtv1.QemuGuestAgentUserPasswordAccessCredentialPropagation{}}}},
	}
	return vm
}

// sshKey makes an ed25519 key pair in dir and returns the private key's path (the public one is beside it).
func sshKey(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name+"@podvirt-e2e", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	return path
}

func pub(t *testing.T, key string) string {
	t.Helper()
	b, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sshOpts make the local ssh non-interactive: the key or nothing, a fresh guest's host key accepted.
var sshOpts = []string{"-t", "-o BatchMode=yes", "-t", "-o StrictHostKeyChecking=no", "-t", "-o UserKnownHostsFile=/dev/null", "-t", "-o ConnectTimeout=20"}

// waitSSH waits until `virtctl ssh` with key logs in as user (works) or is refused (!works).
func waitSSH(t *testing.T, f *framework.Framework, user, key string, works bool) {
	t.Helper()
	what := map[bool]string{true: "logs in", false: "is refused"}[works]
	f.Eventually("ssh as "+user+" with the "+filepath.Base(key)+" key "+what, 3*time.Minute, func(context.Context) (bool, error) {
		args := append([]string{"ssh", user + "@vm/fedora", "-i", key, "--command", "cat /etc/podvirt-release"}, sshOpts...)
		out, code := virtctl(t, f, "", args...)
		if works {
			return code == 0 && strings.Contains(out, "PODVIRT_GUEST=fedora-like"), nil
		}
		return code != 0 && strings.Contains(out, "Permission denied"), nil
	})
}

// scpRoundTrip copies a file into the guest and back with virtctl scp and compares.
func scpRoundTrip(t *testing.T, f *framework.Framework, key, dir string) {
	t.Helper()
	b := make([]byte, 32<<10)
	_, _ = rand.Read(b)
	src, back := filepath.Join(dir, "payload"), filepath.Join(dir, "payload.back")
	if err := os.WriteFile(src, []byte(hex.EncodeToString(b)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := virtctl(t, f, "", append([]string{"scp", "-i", key, src, "root@vm/fedora:/tmp/payload"}, sshOpts...)...); code != 0 {
		t.Fatalf("scp into the guest: exit %d, output:\n%s", code, out)
	}
	if out, code := virtctl(t, f, "", append([]string{"scp", "-i", key, "root@vm/fedora:/tmp/payload", back}, sshOpts...)...); code != 0 {
		t.Fatalf("scp out of the guest: exit %d, output:\n%s", code, out)
	}
	got, err := os.ReadFile(back)
	if err != nil || string(got) != hex.EncodeToString(b) {
		t.Errorf("the file copied in and out differs (%d bytes back, err %v)", len(got), err)
	}
}

// guestSideNIC: the status names the pod network's NIC as the guest does (its agent's eth0) and says so.
func guestSideNIC(t *testing.T, f *framework.Framework) {
	t.Helper()
	f.Eventually("status.interfaces with the guest's name for the NIC", 2*time.Minute, func(ctx context.Context) (bool, error) {
		vmi := &virtv1.VirtualMachineInstance{}
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: "fedora"}, vmi); err != nil {
			return false, err
		}
		nics := vmi.Status.Interfaces
		return len(nics) == 1 && nics[0].InterfaceName == "eth0" && nics[0].InfoSource == "domain, guest-agent" && nics[0].IP != "", nil
	})
}

// objectGraph: virtctl objectgraph lists the instance, its launcher Pod and the credentials' Secrets,
// and --selector keeps only what it selects.
func objectGraph(t *testing.T, f *framework.Framework) {
	t.Helper()
	out, code := virtctl(t, f, "", "objectgraph", "fedora")
	var graph virtv1.ObjectGraphNode
	// The output holds stderr too (a client-go warning would come first): the graph starts at {.
	if code != 0 || !strings.Contains(out, "{") || json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &graph) != nil {
		t.Fatalf("objectgraph: exit %d, output:\n%s", code, out)
	}
	found := map[string]bool{}
	var walk func(n virtv1.ObjectGraphNode)
	walk = func(n virtv1.ObjectGraphNode) {
		found[n.ObjectReference.Kind+"/"+n.ObjectReference.Name] = true
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(graph)
	for _, want := range []string{"VirtualMachine/fedora", "VirtualMachineInstance/fedora", "Secret/keys-cloud", "Secret/keys-agent", "Secret/passwords"} {
		if !found[want] {
			t.Errorf("objectgraph lacks %s; it has %v", want, found)
		}
	}
	if !strings.Contains(out, `"kind": "Pod"`) {
		t.Errorf("objectgraph lacks the launcher Pod:\n%s", out)
	}
	out, code = virtctl(t, f, "", "objectgraph", "fedora", "--selector", "kubevirt.io/dependency-type=config", "-o", "yaml")
	if code != 0 || strings.Contains(out, "kind: VirtualMachineInstance") || !strings.Contains(out, "kind: Secret") {
		t.Errorf("objectgraph --selector config: exit %d, want the Secrets and not the instance; output:\n%s", code, out)
	}
}
