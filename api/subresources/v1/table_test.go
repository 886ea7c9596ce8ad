package v1_test

import (
	"errors"
	"io"
	"net/http"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/yaml"

	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
)

// grants is what a role allows in subresources.kubevirt.io: "verb resource/name" pairs.
func grants(role rbacv1.ClusterRole) sets.Set[string] {
	out := sets.New[string]()
	for _, r := range role.Rules {
		if !slices.Contains(r.APIGroups, subv1.GroupName) {
			continue
		}
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				out.Insert(v + " " + res)
			}
		}
	}
	return out
}

func shippedRoles(t *testing.T) map[string]rbacv1.ClusterRole {
	t.Helper()
	f, err := os.Open("../../../install/rbac/roles.yaml")
	require.NoError(t, err)
	defer f.Close()
	roles := map[string]rbacv1.ClusterRole{}
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var role rbacv1.ClusterRole
		err := dec.Decode(&role)
		if errors.Is(err, io.EOF) {
			return roles
		}
		require.NoError(t, err)
		if role.Kind == "ClusterRole" {
			roles[role.Name] = role
		}
	}
}

// The roles users get grant exactly the table: a row added without its role (or a role left over
// from a removed row) fails here, naming it.
func TestRolesGrantExactlyTheTable(t *testing.T) {
	want := sets.New[string]()
	for _, s := range subv1.Table() {
		want.Insert(s.Verb + " " + s.Resource + "/" + s.Name)
	}
	roles := shippedRoles(t)
	for _, name := range []string{"kubevirt.io:edit", "kubevirt.io:admin"} {
		role, ok := roles[name]
		require.True(t, ok, "install/rbac/roles.yaml has no %s", name)
		got := grants(role)
		assert.Empty(t, sets.List(want.Difference(got)), "%s lacks these rows of subv1.Table", name)
		assert.Empty(t, sets.List(got.Difference(want)), "%s grants these, which are not in subv1.Table", name)
	}
	reads := sets.New[string]()
	for _, s := range subv1.Table() {
		if s.Method == http.MethodGet && !s.LongRunning {
			reads.Insert("get " + s.Resource + "/" + s.Name)
		}
	}
	assert.Equal(t, sets.List(reads), sets.List(grants(roles["kubevirt.io:view"])), "view reads what the guest agent reports (as KubeVirt's), and drives no VM")
	assert.Equal(t, []string{"get version", "list version"}, sets.List(grants(roles["kubevirt.io:default"])), "every authenticated user reads the version, nothing more")
}

func TestTableRows(t *testing.T) {
	seen := sets.New[string]()
	for _, s := range subv1.Table() {
		key := s.Resource + "/" + s.Name
		assert.False(t, seen.Has(key), "%s twice", key)
		seen.Insert(key)
		assert.Contains(t, []string{subv1.VirtualMachines, subv1.VirtualMachineInstances}, s.Resource, key)
		assert.NotEmpty(t, s.Params, "%s: Params holds at least the empty suffix", key)
	}
	assert.ElementsMatch(t, []string{subv1.Console, subv1.VNC, subv1.PortForward, subv1.Exec}, subv1.LongRunningNames())
}
