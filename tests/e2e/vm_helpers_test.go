//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// bootTimeout bounds a guest's boot under software emulation, with room for a loaded machine.
const bootTimeout = 3 * time.Minute

// nodeAgentAddr is the node agent's subresource server on the local cluster's node address.
const nodeAgentAddr = "10.218.0.1:8186"

// applySeed creates the seed's vm-cirros manifest exactly as written (only the namespace is the test's).
func applySeed(t *testing.T, f *framework.Framework) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "examples", "vm-cirros.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &u.Object); err != nil {
		t.Fatal(err)
	}
	f.Create(u)
}

func setRunStrategy(t *testing.T, f *framework.Framework, name string, s virtv1.VirtualMachineRunStrategy) {
	t.Helper()
	vm := &virtv1.VirtualMachine{}
	if err := f.Client.Get(f.Context(), client.ObjectKey{Namespace: f.Namespace, Name: name}, vm); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.Running, vm.Spec.RunStrategy = nil, ptr.To(s)
	if err := f.Client.Patch(f.Context(), vm, patch); err != nil {
		t.Fatal(err)
	}
}

// waitRunning waits for the VM's instance to run (a different one than notUID, when given).
func waitRunning(t *testing.T, f *framework.Framework, name string, notUID string) *virtv1.VirtualMachineInstance {
	t.Helper()
	vmi := &virtv1.VirtualMachineInstance{}
	f.Eventually("instance "+name+" Running", bootTimeout, func(ctx context.Context) (bool, error) {
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: name}, vmi); err != nil {
			return false, err
		}
		return vmi.Status.Phase == virtv1.Running && string(vmi.UID) != notUID && len(vmi.Status.Interfaces) > 0,
			fmt.Errorf("uid %s phase %s reason %q", vmi.UID, vmi.Status.Phase, vmi.Status.Reason)
	})
	return vmi
}

func waitGone(t *testing.T, f *framework.Framework, name string, timeout time.Duration) {
	t.Helper()
	f.Eventually("instance "+name+" gone", timeout, func(ctx context.Context) (bool, error) {
		err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: name}, &virtv1.VirtualMachineInstance{})
		return client.IgnoreNotFound(err) == nil && err != nil, err
	})
}

// consoleContains waits for text in the guest's serial console, as `kubectl logs -c guest-console-log` shows it.
func consoleContains(t *testing.T, f *framework.Framework, vmi *virtv1.VirtualMachineInstance, text string) {
	t.Helper()
	f.Eventually(fmt.Sprintf("%q on the console of %s", text, vmi.Name), bootTimeout, func(context.Context) (bool, error) {
		logs := f.PodLogs(vmi.Status.LauncherPod, launcherv1.ConsoleLogContainer)
		return strings.Contains(logs, text), fmt.Errorf("console so far:\n%s", tail(logs, 20))
	})
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// consoleStream follows the guest's console until the launcher Pod ends; wait returns what it saw.
type consoleStream struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	done chan struct{}
}

func followConsole(t *testing.T, f *framework.Framework, vmi *virtv1.VirtualMachineInstance) *consoleStream {
	t.Helper()
	req := f.Clientset.CoreV1().Pods(f.Namespace).GetLogs(vmi.Status.LauncherPod, &corev1.PodLogOptions{Container: launcherv1.ConsoleLogContainer, Follow: true})
	rc, err := req.Stream(f.Context())
	if err != nil {
		t.Fatalf("follow console: %v", err)
	}
	s := &consoleStream{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer rc.Close()
		buf := make([]byte, 4096)
		for {
			n, err := rc.Read(buf)
			s.mu.Lock()
			s.buf.Write(buf[:n])
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { rc.Close(); <-s.done })
	return s
}

func (s *consoleStream) wait(t *testing.T, timeout time.Duration) string {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(timeout):
		t.Errorf("console stream still open after %s", timeout)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// guestUptime asks the demo guest for its own clock over its declared port 80, at the launcher
// Pod's address (the masqueraded pod network forwards the port into the guest).
func guestUptime(ctx context.Context, vmi *virtv1.VirtualMachineInstance) (float64, error) {
	if len(vmi.Status.Interfaces) == 0 || vmi.Status.Interfaces[0].IP == "" {
		return 0, fmt.Errorf("instance %s has no address", vmi.Name)
	}
	body, err := guestCGI(ctx, vmi.Status.Interfaces[0].IP, "uptime")
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(body, 64)
}

// guestCGI is what the demo guest at ip answers at /cgi-bin/script (a script its user-data put
// there), trimmed: within 3 s, at most 1 KiB.
func guestCGI(ctx context.Context, ip, script string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ip+"/cgi-bin/"+script, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return strings.TrimSpace(string(body)), err
}

func waitUptime(t *testing.T, f *framework.Framework, vmi *virtv1.VirtualMachineInstance) float64 {
	t.Helper()
	var up float64
	f.Eventually("guest answers on its declared port 80", bootTimeout, func(ctx context.Context) (bool, error) {
		var err error
		up, err = guestUptime(ctx, vmi)
		return err == nil, err
	})
	return up
}

// agentCall pauses or unpauses vmi through virt-api (which forwards it to the node agent over
// mutual TLS), as a user would.
func agentCall(f *framework.Framework, vmi *virtv1.VirtualMachineInstance, verb string) {
	t := f.T()
	t.Helper()
	err := f.Clientset.Discovery().RESTClient().Put().
		AbsPath("/apis/subresources.kubevirt.io/v1/namespaces", vmi.Namespace, "virtualmachineinstances", vmi.Name, verb).
		Body([]byte("{}")).Do(f.Context()).Error()
	if err != nil {
		t.Fatalf("%s %s/%s through virt-api: %v", verb, vmi.Namespace, vmi.Name, err)
	}
}

// qemuMarker is what the command line of vm's qemu holds: libvirt names its domain
// NAMESPACE_NAME (-name guest=NAMESPACE_NAME,debug-threads=on); the comma keeps vm-1 from
// matching vm-10.
func qemuMarker(ns, vm string) string { return "guest=" + ns + "_" + vm + "," }

// qemuPID is the pid of the instance's qemu on this machine.
func qemuPID(t *testing.T, vmi *virtv1.VirtualMachineInstance) int {
	t.Helper()
	marker := []byte(qemuMarker(vmi.Namespace, vmi.Name))
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(raw, []byte("qemu-system")) || !bytes.Contains(raw, marker) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		return pid
	}
	t.Fatalf("no qemu process with %s on this machine", marker)
	return 0
}

// killQemu kills the guest's qemu process on this node (the local cluster runs here), as a crash would.
func killQemu(t *testing.T, vmi *virtv1.VirtualMachineInstance) {
	t.Helper()
	pid := qemuPID(t, vmi)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill qemu %d: %v", pid, err)
	}
}

// demoVM is a VM of the demo kernelBoot guest with the seed's 64M, port 80 declared, and user-data.
func demoVM(ns, name string, strategy virtv1.VirtualMachineRunStrategy, grace int64, userData string) *virtv1.VirtualMachine {
	vm := kernelBootVM(ns, name, strategy)
	spec := &vm.Spec.Template.Spec
	spec.TerminationGracePeriodSeconds = ptr.To(grace)
	spec.Domain.Devices.Interfaces = []virtv1.Interface{{Name: "default", Masquerade: &virtv1.InterfaceMasquerade{}, Ports: []virtv1.Port{{Name: "http", Port: 80}}}}
	spec.Networks = []virtv1.Network{{Name: "default", NetworkSource: virtv1.NetworkSource{Pod: &virtv1.PodNetwork{}}}}
	if userData != "" {
		spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, virtv1.Disk{Name: "cloudinit", Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}})
		spec.Volumes = append(spec.Volumes, virtv1.Volume{Name: "cloudinit", VolumeSource: virtv1.VolumeSource{CloudInitNoCloud: &virtv1.CloudInitNoCloudSource{UserData: userData}}})
	}
	return vm
}
