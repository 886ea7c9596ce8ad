package admission

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/scheme"
)

// The HostDisk gate follows the KubeVirt object in Podvirt's namespace over --feature-gates; an
// object elsewhere (a tenant's) changes nothing.
func TestFromClusterFeatureGates(t *testing.T) {
	kv := func(ns string, on, off []string) client.Object {
		return &virtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubevirt"}, Spec: virtv1.KubeVirtSpec{
			Configuration: virtv1.KubeVirtConfiguration{DeveloperConfiguration: &virtv1.DeveloperConfiguration{FeatureGates: on, DisabledFeatureGates: off}}}}
	}
	for _, tc := range []struct {
		name     string
		flag     bool
		objects  []client.Object
		hostDisk bool
	}{
		{"no object, no flag", false, nil, false},
		{"no object, the flag", true, nil, true},
		{"the object turns it on", false, []client.Object{kv("podvirt", []string{"HostDisk"}, nil)}, true},
		{"the object turns the flag's off", true, []client.Object{kv("podvirt", nil, []string{"HostDisk"})}, false},
		{"a tenant's object is not read", false, []client.Object{kv("tenant", []string{"HostDisk"}, nil)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc.objects...).Build()
			p, err := FromCluster(Policy{HostDisk: tc.flag, CrossNamespaceNetworks: true}, c, "podvirt")(t.Context())
			require.NoError(t, err)
			assert.Equal(t, tc.hostDisk, p.HostDisk)
			assert.True(t, p.CrossNamespaceNetworks, "the flags' other settings stay")
		})
	}
}
