package deviceplugin_test

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	"github.com/podvirt/podvirt/nodeagent/deviceplugin"
)

// kubelet plays the kubelet's side of registration: the real Registration gRPC service on kubelet.sock.
type kubelet struct {
	pluginapi.UnimplementedRegistrationServer
	mu       sync.Mutex
	requests []*pluginapi.RegisterRequest
	srv      *grpc.Server
	done     chan struct{}
}

func (k *kubelet) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.requests = append(k.requests, req)
	return &pluginapi.Empty{}, nil
}

func (k *kubelet) registered() map[string]*pluginapi.RegisterRequest {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string]*pluginapi.RegisterRequest{}
	for _, r := range k.requests {
		out[r.ResourceName] = r
	}
	return out
}

// startKubelet serves Registration on dir/kubelet.sock, removing every plugin socket first as a
// starting kubelet does.
func startKubelet(t *testing.T, dir string) *kubelet {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		// A plugin may remove its own socket meanwhile (it saw the old kubelet go): already gone is fine.
		if err := os.Remove(filepath.Join(dir, e.Name())); !errors.Is(err, fs.ErrNotExist) {
			require.NoError(t, err)
		}
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "kubelet.sock"))
	require.NoError(t, err)
	k := &kubelet{srv: grpc.NewServer(), done: make(chan struct{})}
	pluginapi.RegisterRegistrationServer(k.srv, k)
	go func() { defer close(k.done); _ = k.srv.Serve(ln) }()
	t.Cleanup(k.stop)
	return k
}

func (k *kubelet) stop() { k.srv.Stop(); <-k.done }

func dialPlugin(t *testing.T, dir, socket string) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, socket), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

func waitRegistered(t *testing.T, k *kubelet, resources []deviceplugin.Resource) {
	t.Helper()
	require.Eventually(t, func() bool { return len(k.registered()) == len(resources) }, 10*time.Second, 20*time.Millisecond,
		"every resource registers with the kubelet")
	for _, r := range resources {
		req := k.registered()[r.Name]
		require.NotNil(t, req, r.Name)
		assert.Equal(t, pluginapi.Version, req.Version)
		assert.Equal(t, r.SocketName(), req.Endpoint)
	}
}

func TestRegistersServesAndReregistersAfterKubeletRestart(t *testing.T) {
	dir := t.TempDir()
	present := filepath.Join(t.TempDir(), "kvm")
	require.NoError(t, os.WriteFile(present, nil, 0o600))
	resources := []deviceplugin.Resource{
		{Name: launcherv1.KVMResource, DevicePath: present, Count: 110},
		{Name: launcherv1.TunResource, DevicePath: "/dev/net/tun", Count: 110},
		{Name: launcherv1.VhostNetResource, DevicePath: filepath.Join(dir, "no-such-device"), Count: 3},
	}
	k := startKubelet(t, dir)

	ctx, cancel := context.WithCancel(context.Background())
	m := &deviceplugin.Manager{Dir: dir, Resources: resources, HealthInterval: 50 * time.Millisecond, CheckInterval: time.Hour}
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	waitRegistered(t, k, resources)

	// What the kubelet does next: ListAndWatch and Allocate over the plugin's real socket.
	kvm := dialPlugin(t, dir, resources[0].SocketName())
	stream, err := kvm.ListAndWatch(ctx, &pluginapi.Empty{})
	require.NoError(t, err)
	list, err := stream.Recv()
	require.NoError(t, err)
	require.Len(t, list.Devices, 110)
	for _, d := range list.Devices {
		assert.Equal(t, pluginapi.Healthy, d.Health)
	}

	resp, err := kvm.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{list.Devices[0].ID}}, {DevicesIds: []string{list.Devices[1].ID}},
	}})
	require.NoError(t, err)
	require.Len(t, resp.ContainerResponses, 2)
	for _, c := range resp.ContainerResponses {
		require.Len(t, c.Devices, 1)
		assert.Equal(t, &pluginapi.DeviceSpec{ContainerPath: present, HostPath: present, Permissions: "rw"}, clean(c.Devices[0]))
	}
	_, err = kvm.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"gpu-0"}}}})
	require.Error(t, err, "unknown device IDs are refused")

	// The device node disappears: ListAndWatch sends the devices again, unhealthy.
	require.NoError(t, os.Remove(present))
	list, err = stream.Recv()
	require.NoError(t, err)
	assert.Equal(t, pluginapi.Unhealthy, list.Devices[0].Health)

	// A resource whose device node is missing is advertised unhealthy (allocatable 0).
	vhost := dialPlugin(t, dir, resources[2].SocketName())
	vstream, err := vhost.ListAndWatch(ctx, &pluginapi.Empty{})
	require.NoError(t, err)
	list, err = vstream.Recv()
	require.NoError(t, err)
	require.Len(t, list.Devices, 3)
	assert.Equal(t, pluginapi.Unhealthy, list.Devices[0].Health)

	tun := dialPlugin(t, dir, resources[1].SocketName())
	resp, err = tun.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"tun-7"}}}})
	require.NoError(t, err)
	assert.Equal(t, "/dev/net/tun", resp.ContainerResponses[0].Devices[0].HostPath)

	// The kubelet restarts: it wipes the plugin sockets and serves a new kubelet.sock. The plugins come
	// back and register with the new kubelet (the check interval is an hour: inotify must notice).
	k.stop()
	k2 := startKubelet(t, dir)
	waitRegistered(t, k2, resources)
	tun = dialPlugin(t, dir, resources[1].SocketName())
	require.Eventually(t, func() bool {
		_, err := tun.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "the tun plugin serves again after the kubelet restart")
}

func TestRetriesUntilKubeletAppears(t *testing.T) {
	dir := t.TempDir()
	resources := []deviceplugin.Resource{{Name: launcherv1.TunResource, DevicePath: "/dev/net/tun", Count: 1}}
	ctx, cancel := context.WithCancel(context.Background())
	m := &deviceplugin.Manager{Dir: dir, Resources: resources, CheckInterval: 50 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(dir, resources[0].SocketName()))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "the plugin serves before any kubelet exists")

	k := startKubelet(t, dir) // removes our socket too, as a real kubelet start does
	waitRegistered(t, k, resources)
}

func TestResourceSocketNames(t *testing.T) {
	for name, want := range map[string]string{
		launcherv1.KVMResource:      "podvirt-kvm.sock",
		launcherv1.TunResource:      "podvirt-tun.sock",
		launcherv1.VhostNetResource: "podvirt-vhost-net.sock",
	} {
		assert.Equal(t, want, deviceplugin.Resource{Name: name}.SocketName())
	}
}

// clean drops protobuf internals so specs compare by value.
func clean(d *pluginapi.DeviceSpec) *pluginapi.DeviceSpec {
	return &pluginapi.DeviceSpec{ContainerPath: d.ContainerPath, HostPath: d.HostPath, Permissions: d.Permissions}
}
