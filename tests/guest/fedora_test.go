//go:build guestboot

package guest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// fedoraMemory is what KubeVirt's tests give their Fedora guests (libvmifact.FedoraMemory).
const fedoraMemory = "544M"

// TestFedoraLike boots the Fedora-like guest's containerDisk (hack/guest/fedora-like.sh) as KubeVirt's
// tests use it: a NoCloud seed with a cloud-config, a login on the serial console as fedora/fedora
// with Fedora's prompts, sudo without a password, sshd accepting the seed's key, qemu-guest-agent on
// its virtio-serial port, and an ACPI power-off.
func TestFedoraLike(t *testing.T) {
	b := runGuestBuild(t, "fedora-like.sh")
	dir := t.TempDir()
	overlay := filepath.Join(dir, "overlay.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-b", filepath.Join(b.dir, "fedora-like.qcow2"),
		"-F", "qcow2", overlay).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create overlay: %v\n%s", err, out)
	}
	key := filepath.Join(dir, "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	const hostname = "fedora-vm"
	userData := fmt.Sprintf("#cloud-config\nssh_authorized_keys:\n  - %s\nruncmd:\n  - [sh, -c, 'echo podvirt-cloud-init-ran > /dev/ttyS0']\n",
		strings.TrimSpace(string(pub)))
	seed := cloudConfigISO(t, hostname, userData)
	sshPort := freePort(t)
	agentSocket := filepath.Join(dir, "ga.sock")
	args := []string{"-machine", "q35", "-accel", "tcg,tb-size=64", "-cpu", "qemu64", "-smp", "1", "-m", fedoraMemory,
		"-netdev", fmt.Sprintf("user,id=net0,hostfwd=tcp:127.0.0.1:%d-:22", sshPort),
		"-device", "virtio-net-pci,netdev=net0", "-no-reboot",
		"-device", "virtio-serial-pci", "-chardev", "socket,id=ga,path=" + agentSocket + ",server=on,wait=off",
		"-device", "virtserialport,chardev=ga,name=org.qemu.guest_agent.0"}
	args = append(args, virtioDisk("boot", overlay, "qcow2", "containerdisk", false)...)
	args = append(args, virtioDisk("seed", seed, "raw", "cidata", true)...)
	v := startVM(t, args...)

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	at := 0
	expect := func(re string) {
		t.Helper()
		var err error
		if _, at, err = v.console.waitFor(ctx, regexp.MustCompile(re), at); err != nil {
			t.Fatalf("%v", err)
		}
	}
	expect(`Command line: BOOT_IMAGE=/vmlinuz ` + regexp.QuoteMeta(b.env["GUEST_KERNEL_ARGS"]))
	expect(`(fedora|` + hostname + `) login: `)
	t.Logf("login prompt %.1f s after qemu started", time.Since(v.started).Seconds())
	v.send(t, "fedora")
	expect(`Password: `)
	v.send(t, "fedora")
	expect(`\[fedora@` + hostname + ` ~\]\$ `)
	v.send(t, "sudo su")
	expect(`\[root@` + hostname + ` fedora\]# `)
	v.send(t, "cloud-init status --wait; systemctl is-active ssh.socket qemu-guest-agent | tr '\\n' ' '; echo =done")
	expect(`status: done\s+active active =done`)
	if !strings.Contains(v.console.String(), "podvirt-cloud-init-ran") {
		t.Errorf("cloud-init did not run the seed's runcmd")
	}

	var osInfo struct{ ID string }
	if raw := agentCall(ctx, t, agentSocket, "guest-get-osinfo"); json.Unmarshal([]byte(raw), &osInfo) != nil || osInfo.ID != "debian" {
		t.Errorf("guest agent's osinfo = %s, want Debian's", raw)
	}
	out, err := exec.CommandContext(ctx, "ssh", "-i", key, "-p", fmt.Sprint(sshPort), "-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=30",
		"fedora@127.0.0.1", "cat /etc/podvirt-release; sudo id -un").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PODVIRT_GUEST=fedora-like") || !strings.Contains(string(out), "\nroot") {
		t.Errorf("ssh with the seed's key: %v\n%s", err, out)
	}

	if err := v.powerdown(ctx); err != nil {
		t.Fatalf("ACPI power button: %v", err)
	}
	if err := v.waitExit(ctx); err != nil {
		t.Fatalf("qemu after the guest powered off: %v", err)
	}
	t.Logf("powered off %.1f s after qemu started", time.Since(v.started).Seconds())
}

// cloudConfigISO writes a NoCloud seed (ISO9660, volume id cidata) with the given user-data.
func cloudConfigISO(t *testing.T, hostname, userData string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"user-data": userData,
		"meta-data": fmt.Sprintf("instance-id: %s\nlocal-hostname: %s\n", hostname, hostname),
	}
	args := []string{"-quiet", "-output", filepath.Join(dir, "seed.iso"), "-volid", "cidata", "-joliet", "-rock"}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, path)
	}
	if out, err := exec.Command("genisoimage", args...).CombinedOutput(); err != nil {
		t.Fatalf("genisoimage: %v\n%s", err, out)
	}
	return filepath.Join(dir, "seed.iso")
}

// agentCall sends one command to the guest agent on the unix socket at path, after a guest-sync that
// drops anything a previous client left, and returns its "return" member as JSON.
func agentCall(ctx context.Context, t *testing.T, path, command string) string {
	t.Helper()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		t.Fatalf("dial the guest agent: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	r := bufio.NewReader(conn)
	const syncID = 52174
	fmt.Fprintf(conn, `{"execute":"guest-sync","arguments":{"id":%d}}`+"\n", syncID)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("guest-sync: %v", err)
		}
		var reply struct{ Return int }
		if json.Unmarshal(line, &reply) == nil && reply.Return == syncID {
			break
		}
	}
	fmt.Fprintf(conn, `{"execute":%q}`+"\n", command)
	line, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	var reply struct {
		Return json.RawMessage `json:"return"`
	}
	if err := json.Unmarshal(line, &reply); err != nil || reply.Return == nil {
		t.Fatalf("%s: reply %q", command, line)
	}
	return string(reply.Return)
}
