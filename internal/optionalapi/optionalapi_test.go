package optionalapi

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// failingMapper stands for an apiserver that cannot be asked.
type failingMapper struct{ meta.RESTMapper }

func (failingMapper) RESTMapping(schema.GroupKind, ...string) (*meta.RESTMapping, error) {
	return nil, errors.New("connection refused")
}

func TestServed(t *testing.T) {
	dv := schema.GroupVersionKind{Group: "cdi.kubevirt.io", Version: "v1beta1", Kind: "DataVolume"}
	nad := schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(dv, meta.RESTScopeNamespace)
	if ok, err := Served(mapper, dv); !ok || err != nil {
		t.Errorf("a served API: %v, %v", ok, err)
	}
	if ok, err := Served(mapper, nad); ok || err != nil {
		t.Errorf("an API not served: %v, %v (want false, no error)", ok, err)
	}
	if _, err := Served(failingMapper{mapper}, dv); err == nil {
		t.Error("a failed lookup must be an error, not 'not installed'")
	}
}
