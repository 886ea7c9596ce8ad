package admission

import (
	"context"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// migrationValidator admits a migration only of a running instance that is not being migrated
// already, and keeps its spec as created.
type migrationValidator struct {
	reader client.Reader
}

func (v migrationValidator) ValidateCreate(ctx context.Context, m *virtv1.VirtualMachineInstanceMigration) (admission.Warnings, error) {
	errs, err := v.validateCreate(ctx, m)
	if err != nil {
		return nil, err
	}
	return nil, invalid("VirtualMachineInstanceMigration", m, errs)
}

// validateCreate checks the named instance; an error other than a field error is the webhook's own
// failure (reading the instances), which refuses the request too (failurePolicy Fail).
func (v migrationValidator) validateCreate(ctx context.Context, m *virtv1.VirtualMachineInstanceMigration) (field.ErrorList, error) {
	fld := field.NewPath("spec", "vmiName")
	vmi := &virtv1.VirtualMachineInstance{}
	err := v.reader.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.VMIName}, vmi)
	switch {
	case apierrors.IsNotFound(err):
		return field.ErrorList{field.NotFound(fld, m.Spec.VMIName)}, nil
	case err != nil:
		return nil, apierrors.NewInternalError(fmt.Errorf("read virtualmachineinstance %s/%s: %w", m.Namespace, m.Spec.VMIName, err))
	case vmi.Status.Phase != virtv1.Running:
		return field.ErrorList{field.Invalid(fld, m.Spec.VMIName, fmt.Sprintf("the instance is not running (phase %q): only a running instance can be migrated", vmi.Status.Phase))}, nil
	}
	migrations := &virtv1.VirtualMachineInstanceMigrationList{}
	if err := v.reader.List(ctx, migrations, client.InNamespace(m.Namespace)); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("list migrations in %s: %w", m.Namespace, err))
	}
	for _, other := range migrations.Items {
		if other.Spec.VMIName == m.Spec.VMIName && other.Name != m.Name && !other.Status.Phase.IsFinal() {
			return field.ErrorList{field.Invalid(fld, m.Spec.VMIName, fmt.Sprintf("migration %s of this instance is in progress (phase %q)", other.Name, other.Status.Phase))}, nil
		}
	}
	return nil, nil
}

func (migrationValidator) ValidateUpdate(_ context.Context, old, m *virtv1.VirtualMachineInstanceMigration) (admission.Warnings, error) {
	var errs field.ErrorList
	if !reflect.DeepEqual(old.Spec, m.Spec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), "the spec of a migration cannot change once created"))
	}
	at := field.NewPath("metadata", "labels").Key(virtv1.MigrationSelectorLabel)
	label, has := m.Labels[virtv1.MigrationSelectorLabel]
	switch old, had := old.Labels[virtv1.MigrationSelectorLabel]; {
	case had && label != old:
		errs = append(errs, field.Forbidden(at, "names the migrated instance ("+old+") and cannot change or go"))
	case has && label != m.Spec.VMIName:
		errs = append(errs, field.Invalid(at, label, "must name the migrated instance, spec.vmiName ("+m.Spec.VMIName+")"))
	}
	return nil, invalid("VirtualMachineInstanceMigration", m, errs)
}

// migrationDefaulter labels a new migration with the instance it moves (MigrationSelectorLabel),
// replacing whatever the creator put there. An instance name longer than a label value may be (63
// characters) gets no label (a forged one is removed): such migrations are found by spec.vmiName.
type migrationDefaulter struct{}

func (migrationDefaulter) Default(_ context.Context, m *virtv1.VirtualMachineInstanceMigration) error {
	if len(validation.IsValidLabelValue(m.Spec.VMIName)) > 0 {
		delete(m.Labels, virtv1.MigrationSelectorLabel)
		return nil
	}
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels[virtv1.MigrationSelectorLabel] = m.Spec.VMIName
	return nil
}

func (migrationValidator) ValidateDelete(context.Context, *virtv1.VirtualMachineInstanceMigration) (admission.Warnings, error) {
	return nil, nil
}
