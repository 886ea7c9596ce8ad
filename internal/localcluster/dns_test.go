package localcluster

import (
	"context"
	"net/netip"
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podvirt/podvirt/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

// up runs again on a cluster that already has the DNS Service (the e2e tests restart nodes and the
// apiserver with a plain up): the second run must find it, not fail on its ClusterIP being taken.
func TestEnsureDNSServiceTwice(t *testing.T) {
	e := testenv.Require(t, env)
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.NodeName = "node1"
	c.ServiceCIDR = netip.MustParsePrefix("10.0.0.0/24") // envtest's Service range
	ctx := context.Background()
	for i := range 2 {
		if err := c.ensureDNSService(ctx, cs); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
	}
	svc, err := cs.CoreV1().Services(DNSServiceNamespace).Get(ctx, DNSServiceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != "10.0.0.10" {
		t.Errorf("ClusterIP = %s, want 10.0.0.10", svc.Spec.ClusterIP)
	}
	// A Service left at another address is refused with a message naming it, not silently kept.
	c.ServiceCIDR = netip.MustParsePrefix("10.0.0.128/25")
	if err := c.ensureDNSService(ctx, cs); err == nil {
		t.Errorf("a kube-dns Service at 10.0.0.10 was accepted for a cluster whose DNS address is %s", c.dnsServiceIP())
	}
}
