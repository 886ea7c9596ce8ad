package cloudinit_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/nodeagent/launcher/cloudinit"
	"github.com/podvirt/podvirt/nodeagent/launcher/credentials"
	"github.com/podvirt/podvirt/nodeagent/launcher/isoimage"
)

func vmiWith(src virtv1.CloudInitNoCloudSource) *virtv1.VirtualMachineInstance {
	return &virtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "vm-cirros", Namespace: "default"},
		Spec: virtv1.VirtualMachineInstanceSpec{Volumes: []virtv1.Volume{{
			Name: "cloudinitdisk", VolumeSource: virtv1.VolumeSource{CloudInitNoCloud: &src},
		}}},
	}
}

// readISO opens the image with the same library and returns its label and files (Rock Ridge names).
func readISO(t *testing.T, path string) (string, map[string]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	fs, err := iso9660.Read(file.New(f, true), st.Size(), 0, 2048)
	if err != nil {
		t.Fatalf("read iso: %v", err)
	}
	entries, err := fs.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		data, err := fs.ReadFile(e.Name())
		if err != nil {
			t.Fatalf("read %s: %v", e.Name(), err)
		}
		files[e.Name()] = string(data)
	}
	// go-diskfs pads the volume id with NULs where ECMA-119 says spaces; libblkid (what cloud-init uses)
	// trims both, so do the same here.
	return strings.TrimRight(fs.Label(), " \x00"), files
}

func TestSeedFromBase64IsDecoded(t *testing.T) {
	// The seed's vm-cirros user data.
	vmi := vmiWith(virtv1.CloudInitNoCloudSource{
		UserDataBase64: "IyEvYmluL3NoCgplY2hvICdwcmludGVkIGZyb20gY2xvdWQtaW5pdCB1c2VyZGF0YScK",
	})
	seed, err := cloudinit.SeedFor(vmi, "cloudinitdisk", nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "seed.iso")
	if err := cloudinit.WriteISO(path, seed); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() < isoimage.MinSize {
		t.Fatalf("seed is not padded to %d bytes: %v %v", isoimage.MinSize, st.Size(), err)
	}
	label, files := readISO(t, path)
	if label != "cidata" {
		t.Errorf("label = %q, want cidata", label)
	}
	want := map[string]string{
		"user-data": "#!/bin/sh\n\necho 'printed from cloud-init userdata'\n",
		"meta-data": "instance-id: vm-cirros.default\nlocal-hostname: vm-cirros\n",
	}
	if len(files) != len(want) {
		t.Errorf("files = %v, want exactly user-data and meta-data", keys(files))
	}
	for name, content := range want {
		if files[name] != content {
			t.Errorf("%s = %q, want %q", name, files[name], content)
		}
	}
	// blkid is how cloud-init finds the seed in the guest (by label); check the kernel-side view too.
	if blkid, err := exec.LookPath("blkid"); err == nil {
		out, err := exec.Command(blkid, "-p", "-o", "value", "-s", "LABEL", path).Output()
		if err != nil {
			t.Fatalf("blkid: %v", err)
		}
		if strings.TrimSpace(string(out)) != "cidata" {
			t.Errorf("blkid label = %q", out)
		}
	}
}

func TestSeedWithNetworkDataAndSecret(t *testing.T) {
	vmi := vmiWith(virtv1.CloudInitNoCloudSource{
		SecretRef:   &corev1.LocalObjectReference{Name: "my-userdata"},
		NetworkData: "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n",
	})
	vmi.Spec.Hostname = "web-1"
	lookups := 0
	secrets := func(name string) (map[string][]byte, error) {
		lookups++
		if name != "my-userdata" {
			return nil, errors.New("no such secret")
		}
		return map[string][]byte{"userData": []byte("#cloud-config\npassword: x\n")}, nil
	}
	seed, err := cloudinit.SeedFor(vmi, "cloudinitdisk", secrets)
	if err != nil {
		t.Fatal(err)
	}
	if lookups != 1 {
		t.Fatalf("secret looked up %d times", lookups)
	}
	path := filepath.Join(t.TempDir(), "seed.iso")
	if err := cloudinit.WriteISO(path, seed); err != nil {
		t.Fatal(err)
	}
	_, files := readISO(t, path)
	if files["user-data"] != "#cloud-config\npassword: x\n" {
		t.Errorf("user-data = %q", files["user-data"])
	}
	if files["network-config"] != "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n" {
		t.Errorf("network-config = %q", files["network-config"])
	}
	if files["meta-data"] != "instance-id: vm-cirros.default\nlocal-hostname: web-1\n" {
		t.Errorf("meta-data = %q", files["meta-data"])
	}
}

func TestSeedErrorsNameTheField(t *testing.T) {
	cases := []struct {
		name string
		src  virtv1.CloudInitNoCloudSource
		want string
	}{
		{"bad base64", virtv1.CloudInitNoCloudSource{UserDataBase64: "%%%"}, "spec.volumes[name=cloudinitdisk].cloudInitNoCloud.userDataBase64:"},
		{"secret without lookup", virtv1.CloudInitNoCloudSource{SecretRef: &corev1.LocalObjectReference{Name: "s"}}, "cloudInitNoCloud.userDataSecretRef: secret s is not available"},
		{"network secret without key", virtv1.CloudInitNoCloudSource{NetworkDataSecretRef: &corev1.LocalObjectReference{Name: "n"}}, `networkDataSecretRef: secret n has no key "networkdata"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var lookup credentials.SecretLookup
			if tc.src.NetworkDataSecretRef != nil {
				lookup = func(string) (map[string][]byte, error) { return map[string][]byte{}, nil }
			}
			_, err := cloudinit.SeedFor(vmiWith(tc.src), "cloudinitdisk", lookup)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := cloudinit.SeedFor(vmiWith(virtv1.CloudInitNoCloudSource{}), "other", nil); err == nil {
		t.Fatal("no error for a volume that is not there")
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A cloudInitConfigDrive volume gives the same seed in OpenStack's layout, labelled config-2.
func TestConfigDrive(t *testing.T) {
	vmi := vmiWith(virtv1.CloudInitNoCloudSource{})
	vmi.Spec.Volumes[0].VolumeSource = virtv1.VolumeSource{CloudInitConfigDrive: &virtv1.CloudInitConfigDriveSource{UserData: "#!/bin/sh\necho hi\n", NetworkData: "version: 2\n"}}
	seed, err := cloudinit.SeedFor(vmi, "cloudinitdisk", nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cd.iso")
	if err := cloudinit.WriteConfigDrive(path, seed); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	fs, err := iso9660.Read(file.New(f, true), st.Size(), 0, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if label := strings.TrimRight(fs.Label(), " \x00"); label != cloudinit.ConfigDriveLabel {
		t.Errorf("label %q", label)
	}
	for name, want := range map[string]string{
		"openstack/latest/user_data":         "#!/bin/sh\necho hi\n",
		"openstack/latest/network_data.json": "version: 2\n",
		"openstack/latest/meta_data.json":    `{"hostname":"vm-cirros","name":"vm-cirros","uuid":"vm-cirros.default"}`,
	} {
		data, err := fs.ReadFile(name)
		if err != nil || string(data) != want {
			t.Errorf("%s: %q, %v; want %q", name, data, err, want)
		}
	}
}

// Keys of noCloud (configDrive) credentials go into the seed's meta-data (meta_data.json) and nowhere
// else; a key's text cannot add a line of its own.
func TestSeedCarriesCredentialKeys(t *testing.T) {
	cred := func(name string, m virtv1.SSHPublicKeyAccessCredentialPropagationMethod) virtv1.AccessCredential {
		return virtv1.AccessCredential{SSHPublicKey: &virtv1.SSHPublicKeyAccessCredential{
			Source: virtv1.SSHPublicKeyAccessCredentialSource{Secret: &virtv1.AccessCredentialSecretSource{SecretName: name}}, PropagationMethod: m}}
	}
	secrets := map[string]map[string][]byte{
		"nc":    {"k": []byte(`ssh-ed25519 AAAA "quoted" user` + "\n")},
		"cd":    {"k": []byte("ssh-rsa BBBB drive")},
		"agent": {"k": []byte("ssh-rsa CCCC agent")},
	}
	lookup := func(name string) (map[string][]byte, error) { return secrets[name], nil }
	vmi := vmiWith(virtv1.CloudInitNoCloudSource{UserData: "#cloud-config\n"})
	vmi.Spec.AccessCredentials = []virtv1.AccessCredential{
		cred("nc", virtv1.SSHPublicKeyAccessCredentialPropagationMethod{NoCloud: &virtv1.NoCloudSSHPublicKeyAccessCredentialPropagation{}}),
		cred("cd", virtv1.SSHPublicKeyAccessCredentialPropagationMethod{ConfigDrive: &virtv1.ConfigDriveSSHPublicKeyAccessCredentialPropagation{}}),
		cred("agent", virtv1.SSHPublicKeyAccessCredentialPropagationMethod{QemuGuestAgent: &virtv1.QemuGuestAgentSSHPublicKeyAccessCredentialPropagation{Users: []string{"root"}}}),
	}
	seed, err := cloudinit.SeedFor(vmi, "cloudinitdisk", lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := "instance-id: vm-cirros.default\nlocal-hostname: vm-cirros\npublic-keys: [\"ssh-ed25519 AAAA \\\"quoted\\\" user\"]\n"
	if got := string(seed.MetaData()); got != want {
		t.Errorf("meta-data = %q, want %q", got, want)
	}

	vmi.Spec.Volumes[0].VolumeSource = virtv1.VolumeSource{CloudInitConfigDrive: &virtv1.CloudInitConfigDriveSource{UserData: "#cloud-config\n"}}
	seed, err = cloudinit.SeedFor(vmi, "cloudinitdisk", lookup)
	if err != nil {
		t.Fatal(err)
	}
	if len(seed.PublicKeys) != 1 || seed.PublicKeys[0] != "ssh-rsa BBBB drive" {
		t.Errorf("config drive keys = %q", seed.PublicKeys)
	}

	secrets["nc"]["k"] = []byte("ssh-ed25519 AAAA\x1b]0;owned\x07")
	vmi.Spec.Volumes[0].VolumeSource = virtv1.VolumeSource{CloudInitNoCloud: &virtv1.CloudInitNoCloudSource{}}
	if _, err := cloudinit.SeedFor(vmi, "cloudinitdisk", lookup); err == nil || !strings.Contains(err.Error(), "spec.accessCredentials: secret nc key k") {
		t.Errorf("a key with control characters: error %v", err)
	}
}
