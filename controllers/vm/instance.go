package vm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/instancetype"
)

// firmwareNamespace is the UUID namespace firmware UUIDs are derived in.
var firmwareNamespace = uuid.MustParse("6a1a24a1-4061-4607-8bf4-a3963d0c5895")

// firmwareUUID is the VM's stable firmware UUID: derived from its namespace and name, so it is the
// same at every start and for a VM re-created with the same name (licence bindings survive).
func firmwareUUID(vm *virtv1.VirtualMachine) types.UID {
	return types.UID(uuid.NewSHA1(firmwareNamespace, []byte(vm.Namespace+"/"+vm.Name)).String())
}

// templateHash identifies the template (with the instancetype and preference it names) an instance
// was created from.
func templateHash(vm *virtv1.VirtualMachine) string {
	var in any = vm.Spec.Template
	if vm.Spec.Instancetype != nil || vm.Spec.Preference != nil {
		// A changed instancetype or preference matcher changes the next instance too.
		in = []any{vm.Spec.Template, vm.Spec.Instancetype, vm.Spec.Preference}
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return "" // cannot happen: the template is plain data
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// newInstance renders the VirtualMachineInstance for the VM's template expanded with its
// instancetype and preference. It carries the VM's name, the template's labels and annotations, the
// controller finalizer, the template hash and the stable firmware UUID.
func newInstance(vm *virtv1.VirtualMachine, specs instancetype.Specs) (*virtv1.VirtualMachineInstance, error) {
	if vm.Spec.Template == nil {
		return nil, fmt.Errorf("spec.template is required to start the VirtualMachine")
	}
	tmpl := vm.Spec.Template.DeepCopy()
	vmi := &virtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name:        vm.Name,
			Namespace:   vm.Namespace,
			Labels:      tmpl.ObjectMeta.Labels,
			Annotations: tmpl.ObjectMeta.Annotations,
			Finalizers:  []string{virtv1.VirtualMachineControllerFinalizer},
		},
		Spec: tmpl.Spec,
	}
	if vmi.Annotations == nil {
		vmi.Annotations = map[string]string{}
	}
	errs := instancetype.Conflicts(specs.Instancetype, &vmi.Spec, field.NewPath("spec", "template", "spec"))
	if e := instancetype.SpreadError(specs, field.NewPath("spec", "instancetype")); e != nil {
		errs = append(errs, e)
	}
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	instancetype.Apply(specs, &vmi.Spec, vmi.Annotations)
	vmi.Annotations[virtv1.TemplateHashAnnotation] = templateHash(vm)
	if vmi.Labels == nil {
		vmi.Labels = map[string]string{}
	}
	if _, ok := vmi.Labels[virtv1.VirtualMachineLabel]; !ok {
		vmi.Labels[virtv1.VirtualMachineLabel] = vm.Name
	}
	if vmi.Spec.Domain.Firmware == nil {
		vmi.Spec.Domain.Firmware = &virtv1.Firmware{}
	}
	if vmi.Spec.Domain.Firmware.UUID == "" {
		vmi.Spec.Domain.Firmware.UUID = firmwareUUID(vm)
	}
	if reqs := vm.Status.StateChangeRequests; len(reqs) > 0 && reqs[0].Action == virtv1.StartRequest &&
		reqs[0].Data[virtv1.StartRequestDataPausedKey] == virtv1.StartRequestDataPausedTrue {
		vmi.Spec.StartStrategy = ptr.To(virtv1.StartStrategyPaused) // `virtctl start --paused`
	}
	return vmi, nil
}
