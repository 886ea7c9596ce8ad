package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	podvirtscheme "github.com/podvirt/podvirt/internal/scheme"
)

// migrate-cancel deletes the instance's migration that has not ended, labelled or not, and
// nothing else: not an ended one, not another instance's, and nothing on a dry run.
func TestMigrateCancel(t *testing.T) {
	migration := func(name, vmi string, phase virtv1.VirtualMachineInstanceMigrationPhase) *virtv1.VirtualMachineInstanceMigration {
		return &virtv1.VirtualMachineInstanceMigration{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{virtv1.MigrationSelectorLabel: vmi}},
			Spec:       virtv1.VirtualMachineInstanceMigrationSpec{VMIName: vmi},
			Status:     virtv1.VirtualMachineInstanceMigrationStatus{Phase: phase},
		}
	}
	now := migration("now", "vm1", virtv1.MigrationRunning)
	now.Labels = nil // made before admission labelled migrations: found by spec.vmiName
	c := fake.NewClientBuilder().WithScheme(podvirtscheme.New()).WithObjects(
		migration("old", "vm1", virtv1.MigrationSucceeded), now,
		migration("theirs", "vm2", virtv1.MigrationRunning),
	).Build()
	run := func(name string, dry bool) (string, error) {
		streams, _, out, _ := genericiooptions.NewTestIOStreams()
		o := &MigrateCancelOptions{IOStreams: streams, Name: name, DryRun: dry}
		o.factory = func() (*clients, error) { return &clients{namespace: "ns1", client: c}, nil }
		err := o.Run(t.Context())
		return out.String(), err
	}
	exists := func(name string) bool {
		err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns1", Name: name}, &virtv1.VirtualMachineInstanceMigration{})
		return !apierrors.IsNotFound(err)
	}

	out, err := run("vm1", true)
	require.NoError(t, err)
	assert.Equal(t, "VM vm1 was scheduled to migrate-cancel (dry run) (migration now)\n", out)
	assert.True(t, exists("now"), "a dry run deletes nothing")

	out, err = run("vm1", false)
	require.NoError(t, err)
	assert.Equal(t, "VM vm1 was scheduled to migrate-cancel (migration now)\n", out)
	assert.False(t, exists("now"))
	assert.True(t, exists("old"), "an ended migration stays")
	assert.True(t, exists("theirs"), "another instance's migration stays")

	_, err = run("vm1", false)
	assert.EqualError(t, err, "vmi/vm1 has no migration in progress to cancel")
	assert.Equal(t, ExitError, ExitCode(err))
}
