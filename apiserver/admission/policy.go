package admission

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/clusterconfig"
)

// FeatureHostDisk is KubeVirt's feature gate for hostDisk volumes: images in a directory of the node,
// which outlive the instance, so only a cluster administrator turns it on.
const FeatureHostDisk = "HostDisk"

// Features are the feature gates virt-api knows.
var Features = []string{FeatureHostDisk}

// Policy is what the cluster administrator allows beyond the defaults (virt-api's flags, with the
// KubeVirt object's configuration laid over them: FromCluster): the zero Policy is the strictest.
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
	// EvictionStrategy is the strategy of instances that set none (the KubeVirt object's
	// spec.configuration.evictionStrategy); nil is None.
	EvictionStrategy *virtv1.EvictionStrategy
}

// PolicySource gives the policy in force when a request is admitted. With an error it gives the
// flags' policy alone: validators refuse then, the eviction interceptor goes on for an instance
// that sets its own strategy.
type PolicySource func(ctx context.Context) (Policy, error)

// get is the policy in force; a nil source gives the strictest, the zero Policy.
func (ps PolicySource) get(ctx context.Context) (Policy, error) {
	if ps == nil {
		return Policy{}, nil
	}
	return ps(ctx)
}

// Static always gives p.
func Static(p Policy) PolicySource {
	return func(context.Context) (Policy, error) { return p, nil }
}

// FromCluster gives base with the configuration of the KubeVirt object in namespace laid over it
// (clusterconfig.Resolve): its feature gates (HostDisk on or off) and its default eviction
// strategy. r should be a cached reader (clusterconfig.CacheByObject).
func FromCluster(base Policy, r client.Reader, namespace string) PolicySource {
	flags := clusterconfig.Defaults()
	if base.HostDisk {
		flags.FeatureGates = []string{FeatureHostDisk}
	}
	return func(ctx context.Context) (Policy, error) {
		s, _, err := clusterconfig.Read(ctx, r, namespace, flags)
		if err != nil {
			return base, err // the flags alone, for a caller that does not need the rest
		}
		p := base
		p.HostDisk = s.Enabled(FeatureHostDisk)
		p.EvictionStrategy = s.EvictionStrategy
		return p, nil
	}
}

// evictionStrategy is the instance's strategy, or the cluster's default when it sets none.
func (p Policy) evictionStrategy(spec *virtv1.VirtualMachineInstanceSpec) virtv1.EvictionStrategy {
	switch {
	case spec.EvictionStrategy != nil:
		return *spec.EvictionStrategy
	case p.EvictionStrategy != nil:
		return *p.EvictionStrategy
	}
	return virtv1.EvictionStrategyNone
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
