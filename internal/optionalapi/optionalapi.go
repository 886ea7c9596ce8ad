// Package optionalapi tells the controllers whether the cluster serves an API Podvirt uses only when
// it is installed (CDI's DataVolumes, Multus' NetworkAttachmentDefinitions), and how often an object
// waiting for one looks again: installing an API sends no event to the objects that wait for it.
package optionalapi

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Recheck is how often an object waiting for an API that is not served looks again.
const Recheck = 30 * time.Second

// Served reports whether the apiserver serves gvk. The mapper (controller-runtime's) looks the API
// up again on a miss, so a newly installed API is found at the next call.
func Served(mapper meta.RESTMapper, gvk schema.GroupVersionKind) (bool, error) {
	_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("look up the %s API (%s): %w", gvk.Kind, gvk.GroupVersion(), err)
	}
	return true, nil
}
