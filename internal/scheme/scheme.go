// Package scheme builds the runtime.Scheme every Podvirt binary uses: the Kubernetes built-in
// types plus the kubevirt.io/v1 and subresources.kubevirt.io/v1 types.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	itv1beta1 "github.com/podvirt/podvirt/api/instancetype/v1beta1"
	subresourcesv1 "github.com/podvirt/podvirt/api/subresources/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// New returns a scheme with the Kubernetes built-in types and Podvirt's API registered.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(virtv1.AddToScheme(s))
	utilruntime.Must(itv1beta1.AddToScheme(s))
	utilruntime.Must(subresourcesv1.AddToScheme(s))
	return s
}
