package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	"github.com/podvirt/podvirt/nodeagent/launcher/diskcopy"
)

// never is a termination that does not come.
func never() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }

// serve copies every pair, stays while the launcher runs and returns 0 once its exit file appears.
func TestServeCopiesThenStaysUntilTheLauncherEnds(t *testing.T) {
	src, private := t.TempDir(), t.TempDir()
	for name, data := range map[string]string{"vmlinuz": "kernel", "initrd": "initrd"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kb := filepath.Join(private, launcherv1.KernelBootDir)
	done := make(chan int, 1)
	var out, errOut bytes.Buffer
	go func() {
		done <- run([]string{"serve", private, filepath.Join(src, "vmlinuz"), filepath.Join(kb, "kernel"),
			filepath.Join(src, "initrd"), filepath.Join(kb, "initrd")}, &out, &errOut, never)
	}()
	deadline := time.After(10 * time.Second)
	for _, f := range []string{"kernel", "initrd"} {
		for {
			if _, err := os.Stat(filepath.Join(kb, f)); err == nil {
				break
			}
			select {
			case code := <-done:
				t.Fatalf("serve returned %d before the launcher ended: %s", code, errOut.String())
			case <-deadline:
				t.Fatalf("%s never copied", f)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	if err := os.WriteFile(filepath.Join(private, launcherv1.ExitFile), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
	case <-deadline:
		t.Fatal("serve still running after the launcher's exit file appeared")
	}
}

// A failed copy is recorded beside its destination for the launcher, and serve exits 1 at once.
func TestServeRecordsAFailedCopy(t *testing.T) {
	private := t.TempDir()
	dst := filepath.Join(private, launcherv1.DisksDir, "root")
	var out, errOut bytes.Buffer
	if code := run([]string{"serve", private, "/no/such/disk", dst}, &out, &errOut, never); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	why, failed := diskcopy.Failure(dst)
	if !failed || !strings.Contains(why, "copying /no/such/disk out of its image failed") {
		t.Fatalf("failure recorded: %v %q", failed, why)
	}
}

// SIGTERM (the Pod deleted) ends serve with 0.
func TestServeEndsOnTermination(t *testing.T) {
	src, private := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "disk.img"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	terminatedNow := func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"serve", private, filepath.Join(src, "disk.img"), filepath.Join(private, "disks", "root")}, &out, &errOut, terminatedNow); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
}
