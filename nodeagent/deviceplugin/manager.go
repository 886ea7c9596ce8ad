package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Manager serves and registers the plugins of a set of resources, and serves and registers them again
// when the kubelet restarts (a restarting kubelet removes every plugin socket and creates a new
// kubelet.sock). It is a controller-runtime Runnable.
type Manager struct {
	// Dir is the kubelet's device-plugins directory (pluginapi.DevicePluginPath).
	Dir string
	// Resources to advertise.
	Resources []Resource
	// HealthInterval is how often each plugin checks that its device node still exists (default 30 s).
	HealthInterval time.Duration
	// CheckInterval is how often the manager checks for a kubelet restart besides watching Dir with
	// inotify (default 5 s).
	CheckInterval time.Duration
}

// NeedLeaderElection is false: every node agent serves its own node's kubelet.
func (m *Manager) NeedLeaderElection() bool { return false }

// Start serves the plugins until ctx ends.
func (m *Manager) Start(ctx context.Context) error {
	if len(m.Resources) == 0 {
		return errors.New("device plugin: no resources to advertise")
	}
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		return fmt.Errorf("create device plugin dir: %w", err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch device plugin dir: %w", err)
	}
	defer func() { _ = w.Close() }()
	if err := w.Add(m.Dir); err != nil {
		return fmt.Errorf("watch %s: %w", m.Dir, err)
	}
	tick := time.NewTicker(orDefault(m.CheckInterval, 5*time.Second))
	defer tick.Stop()

	srv, err := m.serve(ctx)
	if err != nil {
		return err
	}
	defer func() { srv.stop() }()
	tried, registered := m.register(ctx)
	for {
		retry := false
		var again <-chan time.Time // a failed registration (e.g. a kubelet still starting) is retried soon
		if !registered {
			again = time.After(registerRetry)
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-w.Errors:
			log.FromContext(ctx).Error(err, "Watching the device plugin dir")
			continue
		case <-w.Events:
		case <-tick.C:
			retry = true
		case <-again:
			retry = true
		}
		switch {
		case m.needRestart(tried):
			log.FromContext(ctx).Info("Kubelet restarted or a plugin socket was removed: serving and registering again")
			srv.stop()
			if srv, err = m.serve(ctx); err != nil {
				srv = &serving{}
				return err
			}
			tried, registered = m.register(ctx)
		case retry && !registered:
			tried, registered = m.register(ctx)
		}
	}
}

// registerRetry is how soon a failed registration is tried again.
const registerRetry = time.Second

// register registers every resource and logs the outcome. It returns the kubelet.sock it tried and
// whether registration succeeded.
func (m *Manager) register(ctx context.Context) (kubeletID, bool) {
	logger := log.FromContext(ctx).WithName("deviceplugin")
	tried, err := m.registerAll(ctx)
	if err != nil {
		logger.Info("Kubelet registration failed; will retry", "error", err.Error())
		return tried, false
	}
	logger.Info("Registered with the kubelet", "resources", len(m.Resources))
	return tried, true
}

// kubeletID identifies one kubelet.sock (its inode); zero when there is none.
type kubeletID uint64

func (m *Manager) kubeletSocket() string {
	return filepath.Join(m.Dir, filepath.Base(pluginapi.KubeletSocket))
}

func (m *Manager) currentKubelet() kubeletID {
	fi, err := os.Stat(m.kubeletSocket())
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return kubeletID(st.Ino)
	}
	return 0
}

// needRestart: one of our sockets is gone, or a kubelet.sock other than the one we last tried exists.
func (m *Manager) needRestart(tried kubeletID) bool {
	for _, r := range m.Resources {
		if _, err := os.Stat(filepath.Join(m.Dir, r.SocketName())); err != nil {
			return true
		}
	}
	now := m.currentKubelet()
	return now != 0 && now != tried
}

// serving is the set of running plugin servers.
type serving struct {
	servers []*grpc.Server
	wg      sync.WaitGroup
}

func (s *serving) stop() {
	for _, srv := range s.servers {
		srv.Stop()
	}
	s.wg.Wait()
}

// serve listens on every resource's socket and serves its plugin.
func (m *Manager) serve(ctx context.Context) (*serving, error) {
	s := &serving{}
	for _, r := range m.Resources {
		path := filepath.Join(m.Dir, r.SocketName())
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.stop()
			return nil, fmt.Errorf("remove stale plugin socket: %w", err)
		}
		ln, err := net.Listen("unix", path)
		if err != nil {
			s.stop()
			return nil, fmt.Errorf("listen for %s: %w", r.Name, err)
		}
		srv := grpc.NewServer()
		pluginapi.RegisterDevicePluginServer(srv, &plugin{res: r, healthInterval: orDefault(m.HealthInterval, 30*time.Second)})
		s.servers = append(s.servers, srv)
		s.wg.Go(func() {
			if err := srv.Serve(ln); err != nil {
				log.FromContext(ctx).Error(err, "Serving device plugin", "resource", r.Name)
			}
		})
	}
	return s, nil
}

// registerAll registers every resource with the kubelet and returns the kubelet.sock it tried.
func (m *Manager) registerAll(ctx context.Context) (kubeletID, error) {
	id := m.currentKubelet()
	if id == 0 {
		return 0, fmt.Errorf("no kubelet socket at %s", m.kubeletSocket())
	}
	conn, err := grpc.NewClient("unix://"+m.kubeletSocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return id, fmt.Errorf("connect to kubelet: %w", err)
	}
	defer func() { _ = conn.Close() }()
	client := pluginapi.NewRegistrationClient(conn)
	for _, r := range m.Resources {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := client.Register(rctx, &pluginapi.RegisterRequest{
			Version:      pluginapi.Version,
			Endpoint:     r.SocketName(),
			ResourceName: r.Name,
			Options:      &pluginapi.DevicePluginOptions{},
		})
		cancel()
		if err != nil {
			return id, fmt.Errorf("register %s: %w", r.Name, err)
		}
	}
	return id, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
