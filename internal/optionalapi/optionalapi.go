// Package optionalapi tells the controllers whether the cluster serves an API Podvirt uses only when
// it is installed (CDI's DataVolumes, Multus' NetworkAttachmentDefinitions), and how often an object
// waiting for one looks again: installing an API sends no event to the objects that wait for it.
package optionalapi

import (
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// Recheck is how often an object waiting for an API that is not served looks again.
const Recheck = 30 * time.Second

// Served reports whether the apiserver serves gvk, asking its discovery each time (a group version
// it does not serve at all is no error: the API is not installed). Unlike a REST mapper, which keeps
// a mapping once found, it notices an API that was removed. The controllers ask once per pass of
// an object that needs the answer (an instance with Multus networks that has no launcher Pod yet;
// a VM to start, or with an instance, that has DataVolumes): one cheap GET, repeated every Recheck
// while the object waits.
func Served(disc discovery.DiscoveryInterface, gvk schema.GroupVersionKind) (bool, error) {
	list, err := disc.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("look up the %s API (%s): %w", gvk.Kind, gvk.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Kind == gvk.Kind {
			return true, nil
		}
	}
	return false, nil
}
