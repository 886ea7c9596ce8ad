//go:build e2e

package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/apiserver/admission"
	"github.com/podvirt/podvirt/internal/localcluster"
	"github.com/podvirt/podvirt/tests/framework"
)

// warnings collects the apiserver's Warning headers.
type warnings struct {
	mu   sync.Mutex
	text []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text = append(w.text, text)
}

// virt-api's admission webhooks: defaults, refusals naming the field, the deprecation warning, and
// an immutable instance spec.
func TestAdmission(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	ctx := f.Context()
	seen := &warnings{}
	cfg := rest.CopyConfig(f.Config)
	cfg.WarningHandler = seen
	c, err := client.New(cfg, client.Options{Scheme: f.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	vm := demoVM(f.Namespace, "legacy", virtv1.RunStrategyHalted, 0, "")
	vm.Spec.RunStrategy, vm.Spec.Running = nil, ptr.To(false)
	if err := c.Create(ctx, vm); err != nil {
		t.Fatalf("create a VM with spec.running: %v", err)
	}
	if got := strings.Join(seen.text, "\n"); !strings.Contains(got, "spec.running is deprecated") {
		t.Errorf("no deprecation warning for spec.running; warnings: %q", got)
	}

	bad := demoVM(f.Namespace, "cdrom", virtv1.RunStrategyHalted, 0, "")
	bad.Spec.Template.Spec.Domain.Devices.Disks = append(bad.Spec.Template.Spec.Domain.Devices.Disks,
		virtv1.Disk{Name: "iso", CDRom: &virtv1.CDRomTarget{Bus: virtv1.DiskBusVirtio}})
	bad.Spec.Template.Spec.Volumes = append(bad.Spec.Template.Spec.Volumes, virtv1.Volume{Name: "iso",
		VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: framework.Image("demo-containerdisk")}}})
	err = c.Create(ctx, bad)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.template.spec.domain.devices.disks[") || !strings.Contains(err.Error(), "cdrom.bus") {
		t.Errorf("a cdrom on virtio: want Invalid naming the field, got %v", err)
	}

	vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: "bare"},
		Spec: demoVM(f.Namespace, "bare", virtv1.RunStrategyHalted, 0, "").Spec.Template.Spec}
	if err := c.Create(ctx, vmi); err != nil {
		t.Fatalf("create a VMI: %v", err)
	}
	if vmi.Spec.Domain.Machine == nil || vmi.Spec.Domain.Machine.Type != virtv1.DefaultMachineType {
		t.Errorf("machine type not defaulted: %+v", vmi.Spec.Domain.Machine)
	}
	for _, iface := range vmi.Spec.Domain.Devices.Interfaces {
		if iface.Model != virtv1.DefaultInterfaceModel {
			t.Errorf("interface %s model not defaulted: %q", iface.Name, iface.Model)
		}
	}
	patch := client.MergeFrom(vmi.DeepCopy())
	vmi.Spec.Hostname = "changed"
	if err := c.Patch(ctx, vmi, patch); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "cannot change once created") {
		t.Errorf("changing a VMI's spec: want Invalid, got %v", err)
	}
}

// The webhook port answers only the kube-apiserver: every Pod can reach it and the eviction webhook
// marks instances for evacuation, so a forged AdmissionReview (from a peer on the Pod network, with
// no client certificate or one it made itself with the apiserver's name) fails at the TLS handshake
// and learns nothing, while the apiserver's own calls go through.
func TestWebhookPortAnswersOnlyTheAPIServer(t *testing.T) {
	f := framework.New(t)
	requireDeployed(f)
	ctx := f.Context()

	bad := demoVM(f.Namespace, "refused", virtv1.RunStrategyHalted, 0, "")
	bad.Spec.Template.Spec.Domain.Devices.Disks = append(bad.Spec.Template.Spec.Domain.Devices.Disks,
		virtv1.Disk{Name: "iso", CDRom: &virtv1.CDRomTarget{Bus: virtv1.DiskBusVirtio}})
	bad.Spec.Template.Spec.Volumes = append(bad.Spec.Template.Spec.Volumes, virtv1.Volume{Name: "iso",
		VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: framework.Image("demo-containerdisk")}}})
	if err := f.Client.Create(ctx, bad, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "cdrom.bus") {
		t.Fatalf("the apiserver's call to the webhook: %v, want a refusal naming the bus", err)
	}

	pods := &corev1.PodList{}
	if err := f.Client.List(ctx, pods, client.InNamespace("podvirt"), client.MatchingLabels{"app.kubernetes.io/name": "virt-api"}); err != nil || len(pods.Items) == 0 {
		t.Fatalf("virt-api's Pod: %v (%d found)", err, len(pods.Items))
	}
	url := "https://" + net.JoinHostPort(pods.Items[0].Status.PodIP, "9443") + admission.PathEvictLauncher
	review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"forged","kind":{"group":"policy","version":"v1","kind":"Eviction"},` +
		`"resource":{"group":"","version":"v1","resource":"pods"},"subResource":"eviction","name":"virt-launcher-x-abcde","namespace":"default","operation":"CREATE",` +
		`"userInfo":{"username":"system:admin"},"object":{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"virt-launcher-x-abcde","namespace":"default"}}}}`
	forged := map[string][]tls.Certificate{"no client certificate": nil, "a self-made certificate with the apiserver's name": {selfSigned(t, localcluster.WebhookClientCN)}}
	for name, certs := range forged {
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{ //nolint:gosec // the test checks who is let in, not the server
			InsecureSkipVerify: true, Certificates: certs}}}
		resp, err := hc.Post(url, "application/json", strings.NewReader(review))
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			t.Errorf("%s: the webhook port answered %d: %s", name, resp.StatusCode, body)
		}
	}
}

// selfSigned is a client certificate with common name cn, signed by its own fresh key.
func selfSigned(t *testing.T, cn string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
