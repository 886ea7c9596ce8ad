// Package clusterconfig is the cluster's configuration as Podvirt's components read it: the
// KubeVirt object in Podvirt's own namespace (its spec.configuration) over each component's flags.
// Components read it where they decide, from their cache, so a change to the object applies to the
// next decision without a restart. A KubeVirt object in any other namespace is never read: only
// whoever may write Podvirt's namespace configures the cluster.
package clusterconfig

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// Settings are the configuration values Podvirt honours (docs/kubevirt-cr.md).
type Settings struct {
	// FeatureGates are the gates turned on, by KubeVirt's names, sorted.
	FeatureGates []string
	// UseEmulation runs guests under software emulation: launcher Pods do not request /dev/kvm.
	UseEmulation bool
	// EvictionStrategy is the strategy of instances that set none (nil: None).
	EvictionStrategy *virtv1.EvictionStrategy
	// Migrations are the live migration settings.
	Migrations Migrations
	// ResourceVersion is the KubeVirt object's the settings were read from ("" without one).
	ResourceVersion string
}

// Migrations are the live migration settings Podvirt honours, with KubeVirt's defaults.
type Migrations struct {
	// BandwidthPerMigration caps one migration's transfer, in bytes per second; zero is unlimited.
	BandwidthPerMigration resource.Quantity
	// CompletionTimeoutPerGiB is how long a migration may run per GiB of guest memory, in seconds.
	CompletionTimeoutPerGiB int64
	// ParallelMigrationsPerCluster caps the migrations in flight in the cluster.
	ParallelMigrationsPerCluster uint32
	// ParallelOutboundMigrationsPerNode caps the migrations in flight out of one node.
	ParallelOutboundMigrationsPerNode uint32
}

// KubeVirt's defaults for the migration settings (the completion timeout is the launcher's own).
const (
	DefaultCompletionTimeoutPerGiB           = int64(launcherv1.MigrationCompletionTimeoutPerGiB / time.Second)
	DefaultParallelMigrationsPerCluster      = 5
	DefaultParallelOutboundMigrationsPerNode = 2
)

// Bounds of the settings: beyond them a value is refused (admission) or ignored (Resolve). The
// completion timeout's is the launcher's (launcherv1.MaxMigrationTimeoutSeconds).
const (
	MaxParallelMigrations = 1000
	MaxFeatureGates       = 200
)

// MaxBandwidthPerMigration is the largest bandwidth cap accepted: 1 TiB/s.
var MaxBandwidthPerMigration = resource.MustParse("1Ti")

// Defaults are the settings without a KubeVirt object and without flags.
func Defaults() Settings {
	return Settings{Migrations: Migrations{
		CompletionTimeoutPerGiB:           DefaultCompletionTimeoutPerGiB,
		ParallelMigrationsPerCluster:      DefaultParallelMigrationsPerCluster,
		ParallelOutboundMigrationsPerNode: DefaultParallelOutboundMigrationsPerNode,
	}}
}

// Enabled reports whether the feature gate is on.
func (s Settings) Enabled(gate string) bool { return slices.Contains(s.FeatureGates, gate) }

// Resolve lays the KubeVirt object's configuration over base (the component's flags over
// Defaults): its featureGates are added and its disabledFeatureGates removed, useEmulation is
// added, evictionStrategy and each migration setting it gives replace base's. A value out of bounds
// is ignored (base's stays) and returned as an error naming the field; kv nil gives base.
func Resolve(base Settings, kv *virtv1.KubeVirt) (Settings, field.ErrorList) {
	if kv == nil {
		return base, nil
	}
	s := base
	s.ResourceVersion = kv.ResourceVersion
	cfg := &kv.Spec.Configuration
	at := field.NewPath("spec", "configuration")
	errs := Validate(cfg, at)
	bad := func(p *field.Path) bool {
		return slices.ContainsFunc(errs, func(e *field.Error) bool { return strings.HasPrefix(e.Field, p.String()) })
	}
	if dc := cfg.DeveloperConfiguration; dc != nil && !bad(at.Child("developerConfiguration")) {
		gates := append(slices.Clone(base.FeatureGates), dc.FeatureGates...)
		gates = slices.DeleteFunc(gates, func(g string) bool { return g == "" || slices.Contains(dc.DisabledFeatureGates, g) })
		slices.Sort(gates)
		s.FeatureGates = slices.Compact(gates)
		s.UseEmulation = base.UseEmulation || dc.UseEmulation
	}
	if es := cfg.EvictionStrategy; es != nil && !bad(at.Child("evictionStrategy")) {
		s.EvictionStrategy = es
	}
	if mc := cfg.MigrationConfiguration; mc != nil {
		mat := at.Child("migrations")
		if b := mc.BandwidthPerMigration; b != nil && !bad(mat.Child("bandwidthPerMigration")) {
			s.Migrations.BandwidthPerMigration = b.DeepCopy()
		}
		if t := mc.CompletionTimeoutPerGiB; t != nil && !bad(mat.Child("completionTimeoutPerGiB")) {
			s.Migrations.CompletionTimeoutPerGiB = *t
		}
		if n := mc.ParallelMigrationsPerCluster; n != nil && !bad(mat.Child("parallelMigrationsPerCluster")) {
			s.Migrations.ParallelMigrationsPerCluster = *n
		}
		if n := mc.ParallelOutboundMigrationsPerNode; n != nil && !bad(mat.Child("parallelOutboundMigrationsPerNode")) {
			s.Migrations.ParallelOutboundMigrationsPerNode = *n
		}
	}
	return s, errs
}

// Validate checks the values Podvirt honours against their bounds; the KubeVirt webhook refuses an
// object with errors, and Resolve ignores the fields they name.
func Validate(cfg *virtv1.KubeVirtConfiguration, at *field.Path) field.ErrorList {
	var errs field.ErrorList
	if es := cfg.EvictionStrategy; es != nil && !slices.Contains(virtv1.EvictionStrategies, *es) {
		errs = append(errs, field.NotSupported(at.Child("evictionStrategy"), *es, virtv1.EvictionStrategies))
	}
	if dc := cfg.DeveloperConfiguration; dc != nil {
		dat := at.Child("developerConfiguration")
		if n := len(dc.FeatureGates); n > MaxFeatureGates {
			errs = append(errs, field.TooMany(dat.Child("featureGates"), n, MaxFeatureGates))
		}
		if n := len(dc.DisabledFeatureGates); n > MaxFeatureGates {
			errs = append(errs, field.TooMany(dat.Child("disabledFeatureGates"), n, MaxFeatureGates))
		}
	}
	mc := cfg.MigrationConfiguration
	if mc == nil {
		return errs
	}
	mat := at.Child("migrations")
	if b := mc.BandwidthPerMigration; b != nil && (b.Sign() < 0 || b.Cmp(MaxBandwidthPerMigration) > 0) {
		errs = append(errs, field.Invalid(mat.Child("bandwidthPerMigration"), b.String(), "must be between 0 (unlimited) and "+MaxBandwidthPerMigration.String()+" bytes per second"))
	}
	if t := mc.CompletionTimeoutPerGiB; t != nil && (*t < 1 || *t > launcherv1.MaxMigrationTimeoutSeconds) {
		errs = append(errs, field.Invalid(mat.Child("completionTimeoutPerGiB"), *t, fmt.Sprintf("must be between 1 and %d seconds", launcherv1.MaxMigrationTimeoutSeconds)))
	}
	if n := mc.ParallelMigrationsPerCluster; n != nil && (*n < 1 || *n > MaxParallelMigrations) {
		errs = append(errs, field.Invalid(mat.Child("parallelMigrationsPerCluster"), *n, fmt.Sprintf("must be between 1 and %d", MaxParallelMigrations)))
	}
	if n := mc.ParallelOutboundMigrationsPerNode; n != nil && (*n < 1 || *n > MaxParallelMigrations) {
		errs = append(errs, field.Invalid(mat.Child("parallelOutboundMigrationsPerNode"), *n, fmt.Sprintf("must be between 1 and %d", MaxParallelMigrations)))
	}
	return errs
}

// Read resolves the configuration from the KubeVirt object in namespace over base. With no object
// it is base; with several (admission admits one, but its webhook fails open), the oldest counts.
// An object being deleted still counts until it is gone.
func Read(ctx context.Context, r client.Reader, namespace string, base Settings) (Settings, field.ErrorList, error) {
	var list virtv1.KubeVirtList
	if err := r.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return base, nil, fmt.Errorf("read the cluster configuration (KubeVirt objects in %s): %w", namespace, err)
	}
	if len(list.Items) == 0 {
		return base, nil, nil
	}
	oldest := slices.MinFunc(list.Items, func(a, b virtv1.KubeVirt) int {
		if c := a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	s, errs := Resolve(base, &oldest)
	return s, errs, nil
}

// CacheByObject limits a manager's cache of KubeVirt objects to namespace: add it to the cache
// options' ByObject of a component that calls Read with the manager's client.
func CacheByObject(namespace string) (client.Object, cache.ByObject) {
	return &virtv1.KubeVirt{}, cache.ByObject{Namespaces: map[string]cache.Config{namespace: {}}}
}

// Source reads the settings in force where a component decides: the KubeVirt object in Namespace
// (from Reader, a cache limited by CacheByObject) over Base (Defaults with the component's flags).
// A nil Source gives Defaults.
type Source struct {
	Reader    client.Reader
	Namespace string
	Base      Settings
}

// Read gives the settings in force; values out of bounds are left out (admission refuses them).
func (s *Source) Read(ctx context.Context) (Settings, error) {
	if s == nil {
		return Defaults(), nil
	}
	settings, _, err := Read(ctx, s.Reader, s.Namespace, s.Base)
	return settings, err
}

// Watch has the cache watch KubeVirt objects from its start, with its other informers: a component
// that cannot read them (RBAC, no CRD) then fails as it starts, not at its first decision.
func Watch(ctx context.Context, c cache.Cache) error {
	if _, err := c.GetInformer(ctx, &virtv1.KubeVirt{}, cache.BlockUntilSynced(false)); err != nil {
		return fmt.Errorf("watch the cluster configuration (KubeVirt objects): %w", err)
	}
	return nil
}
