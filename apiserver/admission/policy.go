package admission

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// FeatureHostDisk is KubeVirt's feature gate for hostDisk volumes: images in a directory of the node,
// which outlive the instance, so only a cluster administrator turns it on.
const FeatureHostDisk = "HostDisk"

// Features are the feature gates virt-api knows.
var Features = []string{FeatureHostDisk}

// Policy is what the cluster administrator allows beyond the defaults (virt-api's flags until the
// KubeVirt custom resource exists): the zero Policy is the strictest.
type Policy struct {
	// HostDisk admits hostDisk volumes (FeatureHostDisk).
	HostDisk bool
	// CrossNamespaceNetworks admits Multus networks named NAMESPACE/NAME in another namespace than the
	// instance's.
	CrossNamespaceNetworks bool
	// ExternalEviction admits evictionStrategy External: a drain then waits, with no bound, for a
	// controller of the administrator's to move or stop the guest.
	ExternalEviction bool
	// MaxDiskCapacity bounds an emptyDisk's and a created hostDisk's capacity; zero: DefaultMaxDiskCapacity.
	MaxDiskCapacity resource.Quantity
}

// DefaultMaxDiskCapacity bounds a disk admission lets an instance create on its node.
var DefaultMaxDiskCapacity = resource.MustParse("1Ti")

// EnableFeatures turns on the named feature gates (a comma-separated list, as --feature-gates takes
// it); an unknown name is an error naming the known ones.
func (p *Policy) EnableFeatures(list string) error {
	for _, name := range strings.Split(list, ",") {
		switch name = strings.TrimSpace(name); name {
		case "":
		case FeatureHostDisk:
			p.HostDisk = true
		default:
			return fmt.Errorf("unknown feature gate %q (known: %s)", name, strings.Join(Features, ", "))
		}
	}
	return nil
}

// maxDiskCapacity is MaxDiskCapacity or its default.
func (p Policy) maxDiskCapacity() resource.Quantity {
	if p.MaxDiskCapacity.IsZero() {
		return DefaultMaxDiskCapacity
	}
	return p.MaxDiskCapacity
}
