package apiserver

import (
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/instancetype"
)

// expandSpec answers the VM with its instancetype and preference applied to its template, as its
// instance would be made (KubeVirt's GET virtualmachines/{name}/expand-spec); what cannot be expanded
// is a 422 naming the field.
func (h *Handlers) expandSpec(w http.ResponseWriter, r *http.Request) {
	ctx, key := r.Context(), types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	vm := &virtv1.VirtualMachine{}
	if err := h.Client.Get(ctx, key, vm); err != nil {
		writeError(w, r, err)
		return
	}
	out, err := instancetype.ExpandVM(ctx, h.Client, vm)
	if err != nil {
		writeError(w, r, expandError(key.Name, err))
		return
	}
	out.Kind, out.APIVersion = "VirtualMachine", virtv1.SchemeGroupVersion.String()
	out.ManagedFields = nil
	responsewriters.WriteRawJSON(http.StatusOK, out, w)
}

// expandError is a 422 naming the fields that kept the VM from expanding, else err as it is.
func expandError(name string, err error) error {
	var errs field.ErrorList
	var fe *field.Error
	var agg utilerrors.Aggregate
	switch {
	case errors.As(err, &fe):
		errs = field.ErrorList{fe}
	case errors.As(err, &agg):
		for _, e := range agg.Errors() {
			if errors.As(e, &fe) {
				errs = append(errs, fe)
			}
		}
	}
	if len(errs) == 0 {
		return err
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: virtv1.GroupName, Kind: "VirtualMachine"}, name, errs)
}
