package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/clusterconfig"
)

// Paths of the webhooks for KubeVirt's cluster configuration and for the kinds Podvirt serves but
// does not implement (install/virt-api/webhooks.yaml).
const (
	PathValidateKubeVirt    = "/validate-kubevirt-io-v1-kubevirt"
	PathRefuseUnsupported   = "/refuse-unsupported-kinds"
	unsupportedKindsMessage = "%s (%s) is not supported by Podvirt: the kind is served so that KubeVirt's clients can list and delete it, and creating one is refused (docs/status.md lists what Podvirt implements)"
)

// unsupportedRefuser refuses creating any kind of virtv1.UnsupportedKinds, naming it.
type unsupportedRefuser struct{}

func (unsupportedRefuser) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	for _, k := range virtv1.UnsupportedKinds {
		if k.Group == req.Resource.Group && k.Plural == req.Resource.Resource {
			return admission.Denied(fmt.Sprintf(unsupportedKindsMessage, k.Kind, k.Group))
		}
	}
	return admission.Denied(fmt.Sprintf(unsupportedKindsMessage, req.Kind.Kind, req.Resource.Group))
}

// kubeVirtValidator admits one KubeVirt object, in Podvirt's namespace (a second one would make
// the configuration ambiguous, one elsewhere is never read), and refuses a configuration value out
// of its bounds, naming the field (clusterconfig.Validate).
type kubeVirtValidator struct {
	reader client.Reader
	// namespace is Podvirt's: the only one whose KubeVirt object is read (clusterconfig).
	namespace string
}

func (v kubeVirtValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	var kv virtv1.KubeVirt
	if err := json.Unmarshal(req.Object.Raw, &kv); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode the KubeVirt object: %w", err))
	}
	if errs := clusterconfig.Validate(&kv.Spec.Configuration, field.NewPath("spec", "configuration")); len(errs) > 0 {
		return admission.Denied(errs.ToAggregate().Error())
	}
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	if req.Namespace != v.namespace {
		return admission.Denied(fmt.Sprintf("a KubeVirt object configures this cluster only in Podvirt's namespace %s; one in %s would configure nothing", v.namespace, req.Namespace))
	}
	var list virtv1.KubeVirtList
	if err := v.reader.List(ctx, &list, client.InNamespace(v.namespace)); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("list kubevirts: %w", err))
	}
	for _, kv := range list.Items {
		if kv.Namespace != req.Namespace || kv.Name != req.Name {
			return admission.Denied(fmt.Sprintf("KubeVirt %s/%s already configures this cluster: there can be only one KubeVirt object", kv.Namespace, kv.Name))
		}
	}
	return admission.Allowed("")
}
