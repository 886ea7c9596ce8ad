package nodeagent

import (
	"context"
	"os"
	"path/filepath"
	"sync"

	"github.com/fsnotify/fsnotify"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// socketWatch wakes the agent when a starting launcher's command socket appears (inotify on the
// launcher Pod's private directory), so a launcher is synced as soon as it listens rather than at
// the next poll. A missed event only costs the poll interval.
type socketWatch struct {
	watcher *fsnotify.Watcher
	events  chan event.GenericEvent

	mu      sync.Mutex
	waiting map[string]client.ObjectKey // socket path → instance
}

// socketEvents bounds the wake-ups not yet taken by the controller (more are dropped: the poll
// covers them).
const socketEvents = 256

func newSocketWatch() (*socketWatch, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	return &socketWatch{watcher: w, events: make(chan event.GenericEvent, socketEvents), waiting: map[string]client.ObjectKey{}}, nil
}

// Await asks for a pass of vmi once the socket at path appears. A socket file already there (a
// launcher that died without removing it) is not awaited: the poll looks again.
func (s *socketWatch) Await(path string, vmi *virtv1.VirtualMachineInstance) {
	if _, err := os.Stat(path); err == nil {
		return
	}
	s.mu.Lock()
	_, known := s.waiting[path]
	if !known {
		if err := s.watcher.Add(filepath.Dir(path)); err != nil {
			s.mu.Unlock()
			return // no such directory (yet), or no inotify watch left: the poll comes anyway
		}
		s.waiting[path] = client.ObjectKeyFromObject(vmi)
	}
	s.mu.Unlock()
	if _, err := os.Stat(path); err == nil { // it appeared while the watch was being added
		s.fire(path)
	}
}

// NeedLeaderElection is false: every node agent watches its own node's launchers.
func (s *socketWatch) NeedLeaderElection() bool { return false }

// Start delivers the socket events until ctx ends (a manager.Runnable).
func (s *socketWatch) Start(ctx context.Context) error {
	defer s.watcher.Close()
	log := ctrl.LoggerFrom(ctx).WithName("launcher-sockets")
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-s.watcher.Events:
			if !ok {
				return nil
			}
			switch {
			case ev.Has(fsnotify.Create):
				s.fire(ev.Name)
			case ev.Has(fsnotify.Remove):
				s.forgetDir(ev.Name) // the Pod's directory is gone
			}
		case err, ok := <-s.watcher.Errors:
			if !ok {
				return nil
			}
			log.Error(err, "Watching launcher sockets")
		}
	}
}

// fire wakes the instance waiting for path, once.
func (s *socketWatch) fire(path string) {
	s.mu.Lock()
	key, ok := s.waiting[path]
	if ok {
		delete(s.waiting, path)
		_ = s.watcher.Remove(filepath.Dir(path))
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	select {
	case s.events <- event.GenericEvent{Object: &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}:
	default:
	}
}

// forgetDir drops the waits on sockets in dir.
func (s *socketWatch) forgetDir(dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for path := range s.waiting {
		if filepath.Dir(path) == dir {
			delete(s.waiting, path)
		}
	}
}
