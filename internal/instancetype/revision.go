package instancetype

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	itv1beta1 "github.com/podvirt/podvirt/api/instancetype/v1beta1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// ref is one matcher of a VM, resolved to the object it names.
type ref struct {
	kind, name, revision string
	path                 *field.Path
}

func instancetypeRef(vm *virtv1.VirtualMachine) *ref {
	m := vm.Spec.Instancetype
	if m == nil {
		return nil
	}
	kind := m.Kind
	if kind == "" {
		kind = itv1beta1.KindClusterInstancetype
	}
	return &ref{kind: kind, name: m.Name, revision: m.RevisionName, path: field.NewPath("spec", "instancetype")}
}

func preferenceRef(vm *virtv1.VirtualMachine) *ref {
	m := vm.Spec.Preference
	if m == nil {
		return nil
	}
	kind := m.Kind
	if kind == "" {
		kind = itv1beta1.KindClusterPreference
	}
	return &ref{kind: kind, name: m.Name, revision: m.RevisionName, path: field.NewPath("spec", "preference")}
}

// status is where vm's status records the revision of r's kind (instancetype or preference).
func (r *ref) status(vm *virtv1.VirtualMachine) **virtv1.InstancetypeStatusRef {
	if r.kind == itv1beta1.KindPreference || r.kind == itv1beta1.KindClusterPreference {
		return &vm.Status.PreferenceRef
	}
	return &vm.Status.InstancetypeRef
}

// pinned is the revision vm's status records for the object r names ("" when none).
func (r *ref) pinned(vm *virtv1.VirtualMachine) string {
	status := *r.status(vm)
	if status == nil || status.Name != r.name || status.Kind != r.kind || status.ControllerRevisionRef == nil {
		return ""
	}
	return status.ControllerRevisionRef.Name
}

// object returns an empty object of r's kind.
func (r *ref) object() (client.Object, error) {
	switch r.kind {
	case itv1beta1.KindInstancetype:
		return &itv1beta1.VirtualMachineInstancetype{}, nil
	case itv1beta1.KindClusterInstancetype:
		return &itv1beta1.VirtualMachineClusterInstancetype{}, nil
	case itv1beta1.KindPreference:
		return &itv1beta1.VirtualMachinePreference{}, nil
	case itv1beta1.KindClusterPreference:
		return &itv1beta1.VirtualMachineClusterPreference{}, nil
	}
	return nil, field.NotSupported(r.path.Child("kind"), r.kind, []string{itv1beta1.KindInstancetype, itv1beta1.KindClusterInstancetype, itv1beta1.KindPreference, itv1beta1.KindClusterPreference})
}

// get reads the live object r names.
func (r *ref) get(ctx context.Context, c client.Reader, namespace string) (client.Object, error) {
	obj, err := r.object()
	if err != nil {
		return nil, err
	}
	key := client.ObjectKey{Name: r.name}
	if r.kind == itv1beta1.KindInstancetype || r.kind == itv1beta1.KindPreference {
		key.Namespace = namespace
	}
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, field.NotFound(r.path.Child("name"), fmt.Sprintf("%s %q", r.kind, r.name))
		}
		return nil, fmt.Errorf("get %s %s: %w", r.kind, r.name, err)
	}
	return obj, nil
}

// setSpec stores obj's spec (an instancetype's or a preference's) in s.
func setSpec(s *Specs, obj runtime.Object) {
	switch o := obj.(type) {
	case *itv1beta1.VirtualMachineInstancetype:
		s.Instancetype = &o.Spec
	case *itv1beta1.VirtualMachineClusterInstancetype:
		s.Instancetype = &o.Spec
	case *itv1beta1.VirtualMachinePreference:
		s.Preference = &o.Spec
	case *itv1beta1.VirtualMachineClusterPreference:
		s.Preference = &o.Spec
	}
}

// Live reads the instancetype and preference vm uses as admission must check them: the revision it
// pinned (spec revisionName, else the one its status records for the same object), else the object
// as it is now (before the first start).
func Live(ctx context.Context, c client.Reader, vm *virtv1.VirtualMachine) (Specs, error) {
	var s Specs
	for _, r := range []*ref{instancetypeRef(vm), preferenceRef(vm)} {
		if r == nil {
			continue
		}
		var obj runtime.Object
		var err error
		if pinned := r.pinned(vm); r.revision == "" && pinned != "" {
			obj, err = fromRevision(ctx, c, vm.Namespace, &ref{kind: r.kind, name: r.name, revision: pinned, path: r.path})
			if err == nil {
				setSpec(&s, obj)
				continue
			}
			if !apierrors.IsNotFound(err) {
				return Specs{}, err
			}
		}
		if r.revision != "" {
			obj, err = fromRevision(ctx, c, vm.Namespace, r)
			if apierrors.IsNotFound(err) {
				err = field.NotFound(r.path.Child("revisionName"), r.revision)
			}
		} else {
			obj, err = r.get(ctx, c, vm.Namespace)
		}
		if err != nil {
			return Specs{}, err
		}
		setSpec(&s, obj)
	}
	return s, nil
}

// Pin returns what vm's next instance is made with: the revisions recorded in its status (or named
// by revisionName) when they still match its matchers; otherwise the live objects, which it stores
// as ControllerRevisions owned by vm and records in vm.Status (the caller writes the status).
// Editing an instancetype therefore never changes a VM that already uses it.
// It reads with r (a direct reader: no cache of every ControllerRevision in the cluster) and creates
// revisions with w.
func Pin(ctx context.Context, r client.Reader, w client.Writer, vm *virtv1.VirtualMachine) (Specs, error) {
	var s Specs
	for _, m := range []*ref{instancetypeRef(vm), preferenceRef(vm)} {
		if m == nil {
			continue
		}
		status := m.status(vm)
		name := m.revision
		if name == "" {
			name = m.pinned(vm)
		}
		var obj runtime.Object
		var err error
		if name != "" {
			obj, err = fromRevision(ctx, r, vm.Namespace, &ref{kind: m.kind, name: m.name, revision: name, path: m.path})
		}
		switch {
		case apierrors.IsNotFound(err) && m.revision != "":
			err = field.NotFound(m.path.Child("revisionName"), m.revision)
		case name == "" || apierrors.IsNotFound(err): // first use, or the recorded revision was deleted
			name, obj, err = storeRevision(ctx, r, w, vm, m)
		}
		if err != nil {
			return Specs{}, err
		}
		*status = &virtv1.InstancetypeStatusRef{Name: m.name, Kind: m.kind, ControllerRevisionRef: &virtv1.ControllerRevisionRef{Name: name}}
		setSpec(&s, obj)
	}
	if vm.Spec.Instancetype == nil {
		vm.Status.InstancetypeRef = nil
	}
	if vm.Spec.Preference == nil {
		vm.Status.PreferenceRef = nil
	}
	return s, nil
}

// storeRevision copies the live object r names into a ControllerRevision owned by vm.
func storeRevision(ctx context.Context, rd client.Reader, w client.Writer, vm *virtv1.VirtualMachine, r *ref) (string, runtime.Object, error) {
	obj, err := r.get(ctx, rd, vm.Namespace)
	if err != nil {
		return "", nil, err
	}
	gvk := itv1beta1.SchemeGroupVersion.WithKind(r.kind)
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	raw, err := json.Marshal(obj)
	if err != nil {
		return "", nil, fmt.Errorf("encode %s %s: %w", r.kind, r.name, err)
	}
	uid := string(obj.GetUID())
	name := fmt.Sprintf("%s-%s-%s-%d", vm.Name, obj.GetName(), uid[:min(8, len(uid))], obj.GetGeneration())
	rev := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: vm.Namespace,
			Labels:          map[string]string{virtv1.VirtualMachineLabel: vm.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, virtv1.SchemeGroupVersion.WithKind("VirtualMachine"))},
		},
		Data:     runtime.RawExtension{Raw: raw},
		Revision: obj.GetGeneration(),
	}
	if err := w.Create(ctx, rev); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", nil, fmt.Errorf("store revision of %s %s: %w", r.kind, r.name, err)
	}
	return name, obj, nil
}

// fromRevision reads the object stored in r's revision.
func fromRevision(ctx context.Context, c client.Reader, namespace string, r *ref) (runtime.Object, error) {
	rev := &appsv1.ControllerRevision{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: r.revision}, rev); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, err
		}
		return nil, fmt.Errorf("get revision %s: %w", r.revision, err)
	}
	obj, err := r.object()
	if err != nil {
		return nil, err
	}
	var held metav1.TypeMeta
	if err := json.Unmarshal(rev.Data.Raw, &held); err != nil || held.Kind != r.kind {
		return nil, field.Invalid(r.path.Child("revisionName"), r.revision, fmt.Sprintf("the revision does not hold a %s (it holds %q)", r.kind, held.Kind))
	}
	if err := json.Unmarshal(rev.Data.Raw, obj); err != nil {
		return nil, fmt.Errorf("revision %s does not hold a %s: %w", r.revision, r.kind, err)
	}
	return obj, nil
}
