//go:build launcher

package launcher_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/nodeagent/launcher/diskcopy"
	"github.com/podvirt/podvirt/nodeagent/migrationproxy"
)

// tickUserData starts a loop in the guest that prints "tick N" on the serial console every second.
const tickUserData = "#!/bin/sh\n(i=0; while :; do echo tick $i; i=$((i+1)); sleep 1; done) &\n"

var tickRE = regexp.MustCompile(`tick (\d+)`)

// lastTick is the highest "tick N" in the serial log at path (-1 when none).
func lastTick(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	last := -1
	for _, m := range tickRE.FindAllSubmatch(data, -1) {
		n, _ := strconv.Atoi(string(m[1]))
		last = max(last, n)
	}
	return last
}

// TestLiveMigration moves the running demo guest from one launcher to another, as the node agents
// do between two Pods: the target prepares the disks and runs a libvirt daemon, the source's
// migration sockets are proxied to the target's (migrationproxy, dialing the target's sockets
// directly here), the guest's counter goes on counting on the target, and the source exits 0 with
// state Migrated. A migration whose target cannot be reached fails and leaves the guest running.
// migrationPair boots the demo guest (counting ticks on its serial port) in a source launcher
// named name and starts a target launcher for it, with a libvirt root of its own.
func migrationPair(t *testing.T, name string) (src, dst *pod, data []byte) {
	guest := demoGuest(t)
	podDir := filepath.Join(shared.dir, "pod") // every pod's private dir is here inside it, like /var/run/podvirt
	targetRoot := filepath.Join(shared.dir, "lv-target-"+name)
	for _, d := range []string{podDir, targetRoot} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, podUID, podUID); err != nil {
			t.Fatal(err)
		}
	}
	v := vmi(name, 30)
	v.Spec.Domain.Devices.Disks = []virtv1.Disk{
		{Name: "containerdisk", Disk: &virtv1.DiskTarget{Bus: "virtio"}},
		{Name: "cloudinitdisk", Disk: &virtv1.DiskTarget{Bus: "virtio"}},
	}
	v.Spec.Volumes = []virtv1.Volume{
		{Name: "containerdisk", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "demo"}}},
		{Name: "cloudinitdisk", VolumeSource: virtv1.VolumeSource{CloudInitNoCloud: &virtv1.CloudInitNoCloudSource{UserData: tickUserData}}},
	}
	image := t.TempDir()
	if _, err := diskcopy.Copy(filepath.Join(guest, "demo.qcow2"), image+"/"); err != nil {
		t.Fatal(err)
	}
	withDisk := func(p *pod) {
		if _, err := diskcopy.Copy(image, filepath.Join(p.private, launcherv1.DisksDir, "containerdisk")+"/"); err != nil {
			t.Fatal(err)
		}
	}

	src = startPodAt(t, name, podDir)
	withDisk(src)
	src.sync(v)
	waitLog(t, 120*time.Second, filepath.Join(src.private, launcherv1.SerialLog), "tick 3")

	dst = startPodAt(t, name, podDir, "--libvirt-root", targetRoot)
	withDisk(dst)
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	st := dst.must(http.StatusOK, http.MethodPost, launcherv1.PathMigrationTarget, launcherv1.SyncRequest{VMI: data, Emulation: true})
	if st.Migration == nil || st.Migration.Role != launcherv1.MigrationTarget || st.Migration.Phase != launcherv1.MigrationRunning {
		t.Fatalf("target status %+v, want a running migration as target", st)
	}
	return src, dst, data
}

// proxyMigration joins the source's migration sockets to the target's (the agents' part).
func proxyMigration(t *testing.T, src, dst *pod) {
	proxy, err := migrationproxy.Start(src.private, func(ctx context.Context, name string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", filepath.Join(dst.private, launcherv1.MigrationDir, name))
	}, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
}

// A migration past its completion bound (here 1 s per GiB, at 1 MiB/s) is aborted by the source
// launcher: it fails saying which bound it passed, and the guest runs on at the source.
func TestMigrationPastItsBoundIsAborted(t *testing.T) {
	src, dst, _ := migrationPair(t, "mig-slow")
	proxyMigration(t, src, dst)
	src.must(http.StatusAccepted, http.MethodPost, launcherv1.PathMigrate, launcherv1.MigrateRequest{UID: "slow", BandwidthMiBps: 1, CompletionTimeoutPerGiBSeconds: 1})
	waitFor(t, 30*time.Second, "the slow migration to be aborted", func() bool {
		m := src.status().Migration
		return m != nil && m.Phase == launcherv1.MigrationFailed
	})
	st := src.status()
	if !strings.Contains(st.Migration.Message, "(1s per GiB of the") {
		t.Errorf("the aborted migration says %q, want the bound it passed", st.Migration.Message)
	}
	if st.State != launcherv1.DomainRunning {
		t.Fatalf("after an aborted migration the source is %+v, want Running", st)
	}
	last := lastTick(t, filepath.Join(src.private, launcherv1.SerialLog))
	waitLog(t, 60*time.Second, filepath.Join(src.private, launcherv1.SerialLog), "tick "+strconv.Itoa(last+2))
	t.Logf("aborted migration: %s", st.Migration.Message)
}

func TestLiveMigration(t *testing.T) {
	src, dst, data := migrationPair(t, "mig")
	srcSerial := filepath.Join(src.private, launcherv1.SerialLog)
	dst.must(http.StatusConflict, http.MethodPost, launcherv1.PathSync, launcherv1.SyncRequest{VMI: data, Emulation: true})

	// Nothing proxies the source's sockets yet: the migration fails, the guest runs on.
	src.must(http.StatusAccepted, http.MethodPost, launcherv1.PathMigrate, launcherv1.MigrateRequest{UID: "m1"})
	waitFor(t, 30*time.Second, "the unreachable migration to fail", func() bool {
		m := src.status().Migration
		return m != nil && m.Phase == launcherv1.MigrationFailed
	})
	if st := src.status(); st.State != launcherv1.DomainRunning {
		t.Fatalf("after a failed migration the source is %+v, want Running", st)
	}
	t.Logf("failed migration: %s", src.status().Migration.Message)

	proxyMigration(t, src, dst)

	t0 := time.Now()
	src.must(http.StatusAccepted, http.MethodPost, launcherv1.PathMigrate, launcherv1.MigrateRequest{UID: "m2"})
	src.must(http.StatusAccepted, http.MethodPost, launcherv1.PathMigrate, launcherv1.MigrateRequest{UID: "m2"}) // asked again: nothing new
	src.must(http.StatusConflict, http.MethodPost, launcherv1.PathMigrate, launcherv1.MigrateRequest{UID: "m3"})
	code, final := src.waitExit(3 * time.Minute)
	took := time.Since(t0)
	if code != 0 || final.State != launcherv1.DomainMigrated || final.Reason != launcherv1.ReasonMigrated ||
		final.Migration == nil || final.Migration.Phase != launcherv1.MigrationCompleted || final.Migration.UID != "m2" {
		t.Fatalf("source exited %d with %+v, want 0, Migrated, migration completed", code, final)
	}
	waitFor(t, 30*time.Second, "the target to run the guest", func() bool {
		st := dst.status()
		return st.State == launcherv1.DomainRunning && st.Migration != nil && st.Migration.Phase == launcherv1.MigrationCompleted
	})
	m := final.Migration
	t.Logf("live migration of the demo guest: %s, %d bytes, downtime %d ms (libvirt)", took.Round(time.Millisecond), m.Bytes, m.DowntimeMillis)
	if m.Bytes == 0 {
		t.Fatalf("the source reports no bytes sent: %+v", m)
	}

	last := lastTick(t, srcSerial)
	dstSerial := filepath.Join(dst.private, launcherv1.SerialLog)
	waitLog(t, 60*time.Second, dstSerial, "tick "+strconv.Itoa(last+2))
	if first := firstTick(t, dstSerial); first <= 3 {
		t.Fatalf("the target's guest counts from %d: it booted again instead of going on", first)
	}

	dst.must(http.StatusAccepted, http.MethodPost, launcherv1.PathShutdown, launcherv1.ShutdownRequest{GracePeriodSeconds: 30})
	if code, final := dst.waitExit(60 * time.Second); code != 0 || final.Reason != launcherv1.ReasonGuestShutdown {
		t.Fatalf("target exited %d with %+v after a shutdown, want 0 GuestShutdown", code, final)
	}
}

// firstTick is the lowest "tick N" in the serial log at path (-1 when none).
func firstTick(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := tickRE.FindSubmatch(data)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
