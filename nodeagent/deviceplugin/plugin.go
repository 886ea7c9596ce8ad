// Package deviceplugin is the node agent's kubelet device plugin: it advertises the host devices a
// launcher Pod needs (/dev/kvm, /dev/net/tun, /dev/vhost-net) as extended resources
// (launcherv1.KVMResource, TunResource, VhostNetResource) so that unprivileged launcher Pods get them
// through the device cgroup, and it registers again whenever the kubelet restarts.
//
// It speaks the kubelet's device plugin API v1beta1 over gRPC: one server per resource on a unix socket
// in the kubelet's device-plugins directory, registered with the kubelet's Registration service on
// kubelet.sock in that directory.
package deviceplugin

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Resource is one extended resource backed by one host device that any number of containers share.
type Resource struct {
	// Name is the resource's name, e.g. devices.kubevirt.io/tun.
	Name string
	// DevicePath is the device node, the same on the host and in the container (e.g. /dev/net/tun).
	DevicePath string
	// Count is how many containers may hold the device at once (the advertised device count).
	Count int
}

// SocketName is the name of the resource's plugin socket in the device-plugins directory, e.g.
// podvirt-tun.sock for devices.kubevirt.io/tun.
func (r Resource) SocketName() string {
	short := r.Name[strings.LastIndex(r.Name, "/")+1:]
	return "podvirt-" + short + ".sock"
}

// deviceIDs names the shares of the device: <short name>-0 … <short name>-(Count-1).
func (r Resource) deviceIDs() []string {
	short := strings.TrimSuffix(strings.TrimPrefix(r.SocketName(), "podvirt-"), ".sock")
	ids := make([]string, r.Count)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", short, i)
	}
	return ids
}

// plugin serves the DevicePlugin service for one resource.
type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	res            Resource
	healthInterval time.Duration
}

var _ pluginapi.DevicePluginServer = (*plugin)(nil)

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// health is Healthy while the device node exists.
func (p *plugin) health() string {
	if _, err := os.Stat(p.res.DevicePath); err != nil {
		return pluginapi.Unhealthy
	}
	return pluginapi.Healthy
}

func (p *plugin) devices(health string) *pluginapi.ListAndWatchResponse {
	resp := &pluginapi.ListAndWatchResponse{}
	for _, id := range p.res.deviceIDs() {
		resp.Devices = append(resp.Devices, &pluginapi.Device{ID: id, Health: health})
	}
	return resp
}

// ListAndWatch sends the device list, and again whenever the device node appears or disappears, until
// the kubelet hangs up or the server stops.
func (p *plugin) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	health := p.health()
	if err := stream.Send(p.devices(health)); err != nil {
		return fmt.Errorf("send %s devices: %w", p.res.Name, err)
	}
	tick := time.NewTicker(p.healthInterval)
	defer tick.Stop()
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case <-tick.C:
			if now := p.health(); now != health {
				health = now
				if err := stream.Send(p.devices(health)); err != nil {
					return fmt.Errorf("send %s devices: %w", p.res.Name, err)
				}
			}
		}
	}
}

// Allocate gives every requesting container the device node, read-write.
func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	known := map[string]bool{}
	for _, id := range p.res.deviceIDs() {
		known[id] = true
	}
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		for _, id := range c.DevicesIds {
			if !known[id] {
				return nil, status.Errorf(codes.InvalidArgument, "allocate %s: unknown device %q", p.res.Name, id)
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Devices: []*pluginapi.DeviceSpec{{ContainerPath: p.res.DevicePath, HostPath: p.res.DevicePath, Permissions: "rw"}},
		})
	}
	return resp, nil
}

func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
