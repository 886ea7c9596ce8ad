package nodeagent

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

func nextWake(t *testing.T, s *socketWatch) event.GenericEvent {
	t.Helper()
	select {
	case ev := <-s.events:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up")
		return event.GenericEvent{}
	}
}

// A launcher's socket appearing wakes its instance once; one already there is not awaited (it would
// wake the instance in a loop while a dead launcher's socket refuses); a removed Pod directory is
// forgotten.
func TestSocketWatchWakesTheInstance(t *testing.T) {
	s, err := newSocketWatch()
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"}}
	dir := t.TempDir()
	sock := filepath.Join(dir, "launcher.sock")
	s.Await(sock, vmi)
	s.Await(sock, vmi) // twice: still one wake-up
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	ev := nextWake(t, s)
	assert.Equal(t, "ns/vm", ev.Object.GetNamespace()+"/"+ev.Object.GetName())

	s.Await(sock, vmi) // already there (a launcher not answering on it): nothing to wait for
	select {
	case ev := <-s.events:
		t.Fatalf("a wake-up for a socket already there: %v", ev.Object.GetName())
	default:
	}
	s.mu.Lock()
	assert.Empty(t, s.waiting)
	s.mu.Unlock()

	gone := filepath.Join(t.TempDir(), "pod")
	require.NoError(t, os.Mkdir(gone, 0o755))
	s.Await(filepath.Join(gone, "launcher.sock"), vmi)
	require.NoError(t, os.Remove(gone))
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.waiting) == 0
	}, 10*time.Second, 10*time.Millisecond, "the removed directory's wait is forgotten")

	s.Await(filepath.Join(t.TempDir(), "missing", "launcher.sock"), vmi) // no directory: no watch, no error
	s.mu.Lock()
	assert.Empty(t, s.waiting)
	s.mu.Unlock()
}
