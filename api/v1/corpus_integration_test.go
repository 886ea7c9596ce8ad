package v1_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podvirt/podvirt/internal/corpus"
	"github.com/podvirt/podvirt/internal/testenv"
)

func loadCorpus(t *testing.T) []corpus.Manifest {
	t.Helper()
	manifests, err := corpus.Load(testenv.RepoPath("api", "v1", "testdata", "corpus"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(manifests), 30, "the corpus covers every field family")
	return manifests
}

// Every KubeVirt manifest of the corpus is stored under strict field validation in the version it
// names and reads back in the other served version with nothing pruned (admission, which refuses
// what Podvirt does not run, is not installed here: this is the schema alone).
func TestCorpusRoundTripsUnprunedBetweenVersions(t *testing.T) {
	e := testenv.Require(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	other := map[string]string{"kubevirt.io/v1": "v1alpha3", "kubevirt.io/v1alpha3": "v1"}
	for _, m := range loadCorpus(t) {
		t.Run(m.File, func(t *testing.T) {
			obj := m.Object.DeepCopy()
			obj.SetNamespace(ns)
			require.NoError(t, e.Client.Create(ctx, obj, client.FieldValidation("Strict")))
			t.Cleanup(func() { _ = e.Client.Delete(ctx, obj) })

			version, ok := other[m.Object.GetAPIVersion()]
			require.True(t, ok, "apiVersion %s", m.Object.GetAPIVersion())
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(testenv.GVK(version, m.Object.GetKind()))
			require.NoError(t, e.Client.Get(ctx, client.ObjectKeyFromObject(obj), got))
			assert.True(t, corpus.Contains(got.Object["spec"], m.Object.Object["spec"]),
				"spec read back as %s lost or changed fields:\nwrote %v\nread  %v", version, m.Object.Object["spec"], got.Object["spec"])
			assert.True(t, corpus.Contains(got.GetLabels(), m.Object.GetLabels()))
		})
	}
}

// Strict field validation is what the corpus test relies on: a field KubeVirt does not have is
// refused, named.
func TestUnknownFieldRefusedByName(t *testing.T) {
	e := testenv.Require(t, env)
	obj := loadCorpus(t)[0].Object.DeepCopy()
	obj.SetNamespace(e.Namespace(t))
	path := []string{"spec", "domain", "devices", "frobnicator"}
	if obj.GetKind() != "VirtualMachineInstance" {
		path = append([]string{"spec", "template"}, path...)
	}
	require.NoError(t, unstructured.SetNestedField(obj.Object, true, path...))
	err := e.Client.Create(context.Background(), obj, client.FieldValidation("Strict"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown field "spec.`)
	assert.Contains(t, err.Error(), `devices.frobnicator"`)
}
