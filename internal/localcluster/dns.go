package localcluster

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Cluster DNS: CoreDNS (built from its Go module by make, cached by version) runs as a process of
// the cluster on the first node's address, port 53, and serves cluster.local from the apiserver.
// The Service kube-system/kube-dns, at a fixed ClusterIP, sends to it through an EndpointSlice of
// its own (no selector: it is no Pod), and every kubelet gives Pods that address, as on any cluster.
const (
	compDNS = "coredns"
	// DNSServiceName and DNSServiceNamespace are where KubeVirt's tools and users look for it.
	DNSServiceName      = "kube-dns"
	DNSServiceNamespace = "kube-system"
	dnsPort             = 53
)

// dnsServiceIP is the tenth address of the Service range, as kubeadm picks it.
func (c Config) dnsServiceIP() netip.Addr {
	ip := c.ServiceCIDR.Addr()
	for range 10 {
		ip = ip.Next()
	}
	return ip
}

// cachedCoreDNS is the newest CoreDNS make coredns cached ($CacheDir/bin/coredns-VERSION/coredns),
// or "" when there is none.
func (c Config) cachedCoreDNS() string {
	matches, _ := filepath.Glob(filepath.Join(c.CacheDir, "bin", "coredns-*", "coredns"))
	if len(matches) == 0 {
		return ""
	}
	return matches[len(matches)-1]
}

func (c Config) corefile() string { return c.path("coredns", "Corefile") }

// corefileContent serves the cluster domain from the apiserver and forwards the rest to the
// host's resolvers.
func (c Config) corefileContent() string {
	return fmt.Sprintf(`.:%d {
    bind %s
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s
        fallthrough in-addr.arpa ip6.arpa
    }
    forward . /etc/resolv.conf
    cache 30
}
`, dnsPort, c.NodeIP, c.path("kubeconfigs", "coredns.kubeconfig"))
}

func (c Config) dnsComponent() component {
	return component{name: compDNS, argv: []string{c.CoreDNSBinary, "-conf", c.corefile()}}
}

// ensureDNSService creates kube-system/kube-dns at dnsServiceIP and its EndpointSlice to CoreDNS.
func (c Config) ensureDNSService(ctx context.Context, cs kubernetes.Interface) error {
	ports := []corev1.ServicePort{
		{Name: "dns", Protocol: corev1.ProtocolUDP, Port: dnsPort},
		{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: dnsPort},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: DNSServiceName, Namespace: DNSServiceNamespace,
			Labels: map[string]string{"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}},
		Spec: corev1.ServiceSpec{ClusterIP: c.dnsServiceIP().String(), Ports: ports},
	}
	// Get before Create: creating a Service that exists with the same ClusterIP fails on the IP's
	// allocation ("already allocated", Invalid), not with AlreadyExists, and up runs again on a
	// cluster that has it (the e2e tests restart nodes and the apiserver with a plain up).
	got, err := cs.CoreV1().Services(DNSServiceNamespace).Get(ctx, DNSServiceName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := cs.CoreV1().Services(DNSServiceNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create the cluster DNS Service: %w", err)
		}
	case err != nil:
		return fmt.Errorf("read the cluster DNS Service: %w", err)
	case got.Spec.ClusterIP != svc.Spec.ClusterIP:
		return fmt.Errorf("the cluster DNS Service %s/%s has ClusterIP %s, not %s: delete it or run podvirt-cluster down",
			DNSServiceNamespace, DNSServiceName, got.Spec.ClusterIP, svc.Spec.ClusterIP)
	}
	var epPorts []discoveryv1.EndpointPort
	for _, p := range ports {
		epPorts = append(epPorts, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Protocol: ptr.To(p.Protocol), Port: ptr.To(p.Port)})
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: DNSServiceName + "-coredns", Namespace: DNSServiceNamespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: DNSServiceName, discoveryv1.LabelManagedBy: "podvirt-cluster"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{c.NodeIP.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, NodeName: ptr.To(c.NodeName)}},
		Ports: epPorts,
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(DNSServiceNamespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the cluster DNS EndpointSlice: %w", err)
	}
	return nil
}

// dnsReady is true once CoreDNS answers the kubernetes Service's name from the apiserver.
func (c Config) dnsReady(ctx context.Context) bool {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, netip.AddrPortFrom(c.NodeIP, dnsPort).String())
	}}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	addrs, err := r.LookupHost(ctx, "kubernetes.default.svc.cluster.local")
	return err == nil && len(addrs) > 0 && addrs[0] == c.kubernetesServiceIP().String()
}

// coreDNSReader is what CoreDNS's kubernetes plugin reads (its usual ClusterRole); the identity
// is its client certificate's (pki.go).
const coreDNSUser = "podvirt-coredns"

func ensureCoreDNSRBAC(ctx context.Context, cs kubernetes.Interface) error {
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:" + coreDNSUser},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CoreDNS's ClusterRole: %w", err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "system:" + coreDNSUser},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: coreDNSUser}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CoreDNS's ClusterRoleBinding: %w", err)
	}
	return nil
}
