package v1_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/corpus"
	"github.com/podvirt/podvirt/internal/testenv"
)

// The seed's manifest uses only fields these types know, with KubeVirt's JSON names: a strict decode
// fails on any field the types lack or spell differently.
func TestSeedManifestDecodesStrictly(t *testing.T) {
	raw, err := os.ReadFile(testenv.RepoPath("examples", "vm-cirros.yaml"))
	require.NoError(t, err)
	var vm virtv1.VirtualMachine
	require.NoError(t, yaml.UnmarshalStrict(raw, &vm))

	spec := vm.Spec.Template.Spec
	assert.Equal(t, "vm-cirros", vm.Name)
	assert.Equal(t, virtv1.DiskBusVirtio, spec.Domain.Devices.Disks[1].Disk.Bus)
	assert.Equal(t, int64(64_000_000), spec.Domain.Resources.Requests.Memory().Value(), "64M is 64×10^6 bytes")
	assert.EqualValues(t, 0, *spec.TerminationGracePeriodSeconds)
	require.NotNil(t, spec.Volumes[1].CloudInitNoCloud)
	assert.NotEmpty(t, spec.Volumes[1].CloudInitNoCloud.UserDataBase64)
}

func TestPhaseIsFinal(t *testing.T) {
	for phase, final := range map[virtv1.VirtualMachineInstancePhase]bool{
		virtv1.Pending: false, virtv1.Scheduling: false, virtv1.Scheduled: false, virtv1.Running: false,
		virtv1.Unknown: false, virtv1.Succeeded: true, virtv1.Failed: true,
	} {
		assert.Equal(t, final, phase.IsFinal(), string(phase))
	}
}

// Every manifest of the KubeVirt corpus decodes strictly into these Go types: a Go client gets
// every field KubeVirt's API has, named as KubeVirt names it.
func TestCorpusDecodesStrictly(t *testing.T) {
	manifests, err := corpus.Load(testenv.RepoPath("api", "v1", "testdata", "corpus"))
	require.NoError(t, err)
	require.NotEmpty(t, manifests)
	for _, m := range manifests {
		raw, err := m.Object.MarshalJSON()
		require.NoError(t, err)
		var obj any
		switch m.Object.GetKind() {
		case "VirtualMachine":
			obj = &virtv1.VirtualMachine{}
		case "VirtualMachineInstance":
			obj = &virtv1.VirtualMachineInstance{}
		case "VirtualMachineInstanceReplicaSet":
			obj = &virtv1.VirtualMachineInstanceReplicaSet{}
		default:
			t.Fatalf("%s: unexpected kind %s", m.File, m.Object.GetKind())
		}
		assert.NoError(t, yaml.UnmarshalStrict(raw, obj), m.File)
	}
}
