package admission

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/scheme"
)

func TestMigrationValidator(t *testing.T) {
	vmi := func(name string, phase virtv1.VirtualMachineInstancePhase) *virtv1.VirtualMachineInstance {
		return &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Status: virtv1.VirtualMachineInstanceStatus{Phase: phase}}
	}
	migration := func(name, vmi string, phase virtv1.VirtualMachineInstanceMigrationPhase) *virtv1.VirtualMachineInstanceMigration {
		return &virtv1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: virtv1.VirtualMachineInstanceMigrationSpec{VMIName: vmi}, Status: virtv1.VirtualMachineInstanceMigrationStatus{Phase: phase}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		vmi("running", virtv1.Running), vmi("scheduling", virtv1.Scheduling), vmi("busy", virtv1.Running), vmi("done", virtv1.Running),
		migration("m1", "busy", virtv1.MigrationRunning), migration("m2", "done", virtv1.MigrationSucceeded),
	).Build()
	v := migrationValidator{reader: c}
	for _, tc := range []struct {
		vmi, want string // want: what the refusal says, "" when admitted
	}{
		{"running", ""},
		{"done", ""}, // its earlier migration finished
		{"missing", `spec.vmiName: Not found: "missing"`},
		{"scheduling", `spec.vmiName: Invalid value: "scheduling": the instance is not running (phase "Scheduling")`},
		{"busy", `migration m1 of this instance is in progress (phase "Running")`},
	} {
		t.Run(tc.vmi, func(t *testing.T) {
			_, err := v.ValidateCreate(t.Context(), migration("new", tc.vmi, ""))
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := v.ValidateUpdate(t.Context(), migration("m1", "busy", ""), migration("m1", "running", ""))
	assert.ErrorContains(t, err, "spec: Forbidden")
}

// A migration is labelled with its instance on create, whatever its creator wrote there, and the
// label then stays: clients find an instance's migrations by it.
func TestMigrationSelectorLabel(t *testing.T) {
	m := &virtv1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m",
		Labels: map[string]string{virtv1.MigrationSelectorLabel: "someone-else", "team": "a"}},
		Spec: virtv1.VirtualMachineInstanceMigrationSpec{VMIName: "vm"}}
	require.NoError(t, migrationDefaulter{}.Default(t.Context(), m))
	assert.Equal(t, map[string]string{virtv1.MigrationSelectorLabel: "vm", "team": "a"}, m.Labels)
	bare := &virtv1.VirtualMachineInstanceMigration{Spec: virtv1.VirtualMachineInstanceMigrationSpec{VMIName: "vm"}}
	require.NoError(t, migrationDefaulter{}.Default(t.Context(), bare))
	assert.Equal(t, "vm", bare.Labels[virtv1.MigrationSelectorLabel])

	v := migrationValidator{}
	changed := m.DeepCopy()
	changed.Labels[virtv1.MigrationSelectorLabel] = "other"
	_, err := v.ValidateUpdate(t.Context(), m, changed)
	assert.ErrorContains(t, err, `metadata.labels[kubevirt.io/vmi-name]: Forbidden: names the migrated instance (vm) and cannot change or go`)
	gone := m.DeepCopy()
	delete(gone.Labels, virtv1.MigrationSelectorLabel)
	_, err = v.ValidateUpdate(t.Context(), m, gone)
	assert.ErrorContains(t, err, "cannot change or go")
	other := m.DeepCopy()
	other.Labels["team"] = "b"
	_, err = v.ValidateUpdate(t.Context(), m, other)
	assert.NoError(t, err, "other labels may change")

	// A migration made before admission labelled them may be labelled later, only with its instance.
	unlabelled := &virtv1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"},
		Spec: virtv1.VirtualMachineInstanceMigrationSpec{VMIName: "vm"}}
	forged := unlabelled.DeepCopy()
	forged.Labels = map[string]string{virtv1.MigrationSelectorLabel: "other"}
	_, err = v.ValidateUpdate(t.Context(), unlabelled, forged)
	assert.ErrorContains(t, err, "must name the migrated instance, spec.vmiName (vm)")
	forged.Labels[virtv1.MigrationSelectorLabel] = "vm"
	_, err = v.ValidateUpdate(t.Context(), unlabelled, forged)
	assert.NoError(t, err)

	// An instance name too long for a label value: no label (and a forged one goes).
	long := strings.Repeat("a", 64)
	lm := &virtv1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{virtv1.MigrationSelectorLabel: "x"}},
		Spec: virtv1.VirtualMachineInstanceMigrationSpec{VMIName: long}}
	require.NoError(t, migrationDefaulter{}.Default(t.Context(), lm))
	assert.NotContains(t, lm.Labels, virtv1.MigrationSelectorLabel)
}
