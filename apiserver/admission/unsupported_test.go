package admission

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/scheme"
)

// Every kind Podvirt serves without implementing it is refused on create, naming the kind; deletes
// and updates (finalizers being stripped) pass.
func TestUnsupportedKindsAreRefusedOnCreateOnly(t *testing.T) {
	for _, k := range virtv1.UnsupportedKinds {
		req := func(op admissionv1.Operation) admission.Request {
			return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op,
				Resource: metav1.GroupVersionResource{Group: k.Group, Version: k.Versions[0], Resource: k.Plural}}}
		}
		resp := unsupportedRefuser{}.Handle(context.Background(), req(admissionv1.Create))
		assert.False(t, resp.Allowed, k.Kind)
		assert.Contains(t, resp.Result.Message, k.Kind+" ("+k.Group+") is not supported by Podvirt", k.Kind)
		for _, op := range []admissionv1.Operation{admissionv1.Delete, admissionv1.Update} {
			assert.True(t, unsupportedRefuser{}.Handle(context.Background(), req(op)).Allowed, "%s %s", op, k.Kind)
		}
	}
}

// One KubeVirt object per cluster, in Podvirt's namespace: a second one is refused naming the
// first, one in another namespace is refused naming Podvirt's; the first may be applied again.
func TestOneKubeVirtObject(t *testing.T) {
	v := kubeVirtValidator{namespace: "podvirt", reader: fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		&virtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: "podvirt", Name: "kubevirt"}},
		&virtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: "stray", Name: "kubevirt"}}).Build()}
	create := func(ns, name string) admission.Response {
		return v.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Namespace: ns, Name: name, Object: runtime.RawExtension{Raw: []byte(`{"spec":{}}`)}}})
	}
	assert.True(t, create("podvirt", "kubevirt").Allowed, "applied again; one left elsewhere (stray) is not counted")
	resp := create("podvirt", "second")
	assert.False(t, resp.Allowed)
	assert.Contains(t, resp.Result.Message, "KubeVirt podvirt/kubevirt already configures this cluster")
	resp = create("elsewhere", "kubevirt")
	assert.False(t, resp.Allowed)
	assert.Contains(t, resp.Result.Message, "only in Podvirt's namespace podvirt")
}

// A setting Podvirt honours is refused out of its bounds, on create and on update, naming the field.
func TestKubeVirtSettingsWithinBounds(t *testing.T) {
	v := kubeVirtValidator{namespace: "podvirt", reader: fake.NewClientBuilder().WithScheme(scheme.New()).Build()}
	for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Update} {
		for raw, field := range map[string]string{
			`{"spec":{"configuration":{"migrations":{"parallelMigrationsPerCluster":0}}}}`:   "spec.configuration.migrations.parallelMigrationsPerCluster",
			`{"spec":{"configuration":{"migrations":{"bandwidthPerMigration":"-5Mi"}}}}`:     "spec.configuration.migrations.bandwidthPerMigration",
			`{"spec":{"configuration":{"migrations":{"completionTimeoutPerGiB":99999999}}}}`: "spec.configuration.migrations.completionTimeoutPerGiB",
			`{"spec":{"configuration":{"evictionStrategy":"Whenever"}}}`:                     "spec.configuration.evictionStrategy",
			`{"spec":`: "decode the KubeVirt object",
		} {
			resp := v.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: op, Namespace: "podvirt", Name: "kubevirt", Object: runtime.RawExtension{Raw: []byte(raw)}}})
			assert.False(t, resp.Allowed, raw)
			assert.Contains(t, resp.Result.Message, field, raw)
		}
		resp := v.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: op, Namespace: "podvirt", Name: "kubevirt", Object: runtime.RawExtension{Raw: []byte(
				`{"spec":{"configuration":{"evictionStrategy":"LiveMigrate","migrations":{"bandwidthPerMigration":"64Mi","parallelMigrationsPerCluster":2},"network":{"kept":true}}}}`)}}})
		assert.True(t, resp.Allowed, "%+v", resp.Result)
	}
}
