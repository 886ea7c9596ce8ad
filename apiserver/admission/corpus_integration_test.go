package admission_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/podvirt/podvirt/apiserver/admission"
	"github.com/podvirt/podvirt/internal/corpus"
	"github.com/podvirt/podvirt/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWith(m, &env, testenv.Options{Webhooks: func(srv webhook.Server, s *runtime.Scheme, c client.Client) {
		admission.Register(countingServer{srv}, s, c, "podvirt", admission.Static(admission.Policy{})) // the defaults a cluster gets
	}}))
}

// Each KubeVirt manifest of the corpus, created through the real apiserver with virt-api's webhooks
// installed, is either accepted or refused naming the field Podvirt does not run (or the field
// that conflicts with its instancetype, or the instancetype that does not exist).
func TestCorpusAcceptedOrRefusedByName(t *testing.T) {
	e := testenv.Require(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	dir := testenv.RepoPath("api", "v1", "testdata", "corpus")
	manifests, err := corpus.Load(dir)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(manifests), 30)
	// The instancetypes and preferences the corpus's VMs name.
	objects, err := corpus.Objects(filepath.Join(dir, "instancetypes"))
	require.NoError(t, err)
	for _, o := range objects {
		if strings.HasPrefix(o.GetKind(), "VirtualMachineCluster") {
			t.Cleanup(func() { _ = e.Client.Delete(ctx, o) })
		} else {
			o.SetNamespace(ns)
		}
		require.NoError(t, e.Client.Create(ctx, o, client.FieldValidation("Strict")), o.GetName())
	}
	var accepted, refused int
	for _, m := range manifests {
		t.Run(m.File, func(t *testing.T) {
			obj := m.Object.DeepCopy()
			obj.SetNamespace(ns)
			err := e.Client.Create(ctx, obj, client.DryRunAll, client.FieldValidation("Strict"))
			if m.Refused == "" {
				accepted++
				assert.NoError(t, err)
				return
			}
			refused++
			require.Error(t, err, "admission must refuse %s", m.Refused)
			assert.Contains(t, err.Error(), "admission webhook")
			assert.Contains(t, err.Error(), m.Refused+": ")
		})
	}
	t.Logf("%d manifests accepted, %d refused by name", accepted, refused)
}
