package optionalapi

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	discoveryfake "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// Served answers from discovery each time, so an API removed meanwhile is noticed; a group version
// the apiserver does not serve at all is no error, a failed lookup is.
func TestServed(t *testing.T) {
	dv := schema.GroupVersionKind{Group: "cdi.kubevirt.io", Version: "v1beta1", Kind: "DataVolume"}
	nad := schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"}
	disc := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}
	disc.Resources = []*metav1.APIResourceList{{GroupVersion: dv.GroupVersion().String(),
		APIResources: []metav1.APIResource{{Name: "datavolumes", Kind: "DataVolume"}}}}
	check := func(gvk schema.GroupVersionKind, want bool) {
		t.Helper()
		if got, err := Served(disc, gvk); got != want || err != nil {
			t.Errorf("%s served = %v, %v; want %v", gvk.Kind, got, err, want)
		}
	}
	check(dv, true)
	check(nad, false)
	check(schema.GroupVersionKind{Group: dv.Group, Version: dv.Version, Kind: "DataSource"}, false)

	disc.Resources = []*metav1.APIResourceList{{GroupVersion: nad.GroupVersion().String(),
		APIResources: []metav1.APIResource{{Name: "network-attachment-definitions", Kind: "NetworkAttachmentDefinition"}}}}
	check(dv, false) // removed
	check(nad, true) // installed

	disc.PrependReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if _, err := Served(disc, dv); err == nil {
		t.Error("a failed lookup must be an error, not 'not installed'")
	}
}
