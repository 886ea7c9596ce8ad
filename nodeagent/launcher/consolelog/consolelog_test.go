package consolelog_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	"github.com/podvirt/podvirt/nodeagent/launcher/consolelog"
)

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// TestFollowUntilExitFile: waits for the log to appear, follows it as it grows, drains and stops
// once the launcher's exit file is there.
func TestFollowUntilExitFile(t *testing.T) {
	dir := t.TempDir()
	var out syncBuffer
	errc := make(chan error, 1)
	go func() { errc <- consolelog.Follow(context.Background(), dir, &out, 5*time.Millisecond) }()
	logPath := filepath.Join(dir, launcherv1.SerialLog)
	appendTo(t, logPath, "SeaBIOS\r\n")
	waitFor(t, "first line", func() bool { return out.String() == "SeaBIOS\r\n" })
	appendTo(t, logPath, "Linux version 6.1\r\n")
	waitFor(t, "second line", func() bool { return out.String() == "SeaBIOS\r\nLinux version 6.1\r\n" })
	appendTo(t, logPath, "reboot: Power down\r\n")
	if err := os.WriteFile(filepath.Join(dir, launcherv1.ExitFile), []byte(`{"state":"Shutoff"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not return after the exit file appeared")
	}
	if got := out.String(); got != "SeaBIOS\r\nLinux version 6.1\r\nreboot: Power down\r\n" {
		t.Fatalf("output = %q", got)
	}
}

// answerOnSocket plays a running launcher: its command socket in dir answers until the returned
// function is called.
func answerOnSocket(t *testing.T, dir string) (die func()) {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(dir, launcherv1.CommandSocket))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return func() { ln.Close(); wg.Wait() }
}

// TestFollowStopsWhenLauncherDies: a launcher that answered on its socket and then stopped answering
// (killed without writing the exit file) ends the follow too.
func TestFollowStopsWhenLauncherDies(t *testing.T) {
	dir := t.TempDir()
	dies := answerOnSocket(t, dir)
	appendTo(t, filepath.Join(dir, launcherv1.SerialLog), "hello\n")
	var out syncBuffer
	errc := make(chan error, 1)
	go func() { errc <- consolelog.Follow(context.Background(), dir, &out, 5*time.Millisecond) }()
	waitFor(t, "output", func() bool { return out.String() == "hello\n" })
	// Follow has dialed the socket at least once before the first copy; now the launcher dies.
	dies()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not return after the launcher's socket stopped answering")
	}
}

// TestFollowStopsOnContext: the container's SIGTERM ends it.
func TestFollowStopsOnContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- consolelog.Follow(ctx, t.TempDir(), &syncBuffer{}, 5*time.Millisecond) }()
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Follow ignored its context")
	}
}

// TestFollowOutlivesSIGTERMWhileTheLauncherRuns: when the Pod is deleted every container is told to
// stop at once; the console keeps following while the launcher still answers, so the guest's
// shutdown output (printed after the SIGTERM) reaches kubectl logs.
func TestFollowOutlivesSIGTERMWhileTheLauncherRuns(t *testing.T) {
	dir := t.TempDir()
	defer answerOnSocket(t, dir)()
	logPath := filepath.Join(dir, launcherv1.SerialLog)
	appendTo(t, logPath, "booted\n")
	ctx, sigterm := context.WithCancel(context.Background())
	var out syncBuffer
	errc := make(chan error, 1)
	go func() { errc <- consolelog.Follow(ctx, dir, &out, 5*time.Millisecond) }()
	waitFor(t, "boot line", func() bool { return out.String() == "booted\n" })
	sigterm()
	appendTo(t, logPath, "ACPI power button, powering off\n")
	waitFor(t, "shutdown line after SIGTERM", func() bool { return strings.Contains(out.String(), "powering off") })
	if err := os.WriteFile(filepath.Join(dir, launcherv1.ExitFile), []byte(`{"state":"Shutoff"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not return after the exit file appeared")
	}
}

// A guest that writes without end cannot fill the node's disk: the follower empties serial0.log once
// it has copied MaxSerialLog of it, and the output still has every byte in order.
func TestFollowRotatesTheSerialLog(t *testing.T) {
	dir := t.TempDir()
	var out syncBuffer
	errc := make(chan error, 1)
	go func() { errc <- consolelog.Follow(context.Background(), dir, &out, 5*time.Millisecond) }()
	logPath := filepath.Join(dir, launcherv1.SerialLog)
	line := strings.Repeat("x", 1023) + "\n"
	var want strings.Builder
	for i := range 3 * consolelog.MaxSerialLog / len(line) {
		chunk := fmt.Sprintf("%07d", i) + line[7:]
		appendTo(t, logPath, chunk)
		want.WriteString(chunk)
		if i%256 == 255 { // let the follower catch up now and then, as a guest's pace would
			waitFor(t, "the follower catches up", func() bool { return out.String() == want.String() })
		}
	}
	waitFor(t, "everything copied", func() bool { return out.String() == want.String() })
	waitFor(t, "the log emptied", func() bool {
		st, err := os.Stat(logPath)
		return err == nil && st.Size() < consolelog.MaxSerialLog
	})
	if err := os.WriteFile(filepath.Join(dir, launcherv1.ExitFile), []byte(`{"state":"Shutoff"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if out.String() != want.String() {
		t.Fatalf("output differs: %d bytes, want %d", len(out.String()), want.Len())
	}
}
