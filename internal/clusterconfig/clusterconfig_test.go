package clusterconfig

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

func kubeVirt(cfg virtv1.KubeVirtConfiguration) *virtv1.KubeVirt {
	return &virtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: "podvirt", Name: "kubevirt", Generation: 3},
		Spec: virtv1.KubeVirtSpec{Configuration: cfg}}
}

func TestResolve(t *testing.T) {
	live := virtv1.EvictionStrategyLiveMigrate
	bogus := virtv1.EvictionStrategy("Sometimes")
	flags := Defaults()
	flags.FeatureGates = []string{"HostDisk"}
	cases := []struct {
		name string
		base Settings
		kv   *virtv1.KubeVirt
		want func(*Settings)
		errs []string
	}{
		{name: "no object: the flags", base: flags, kv: nil, want: func(*Settings) {}},
		{name: "empty configuration keeps the flags", base: flags, kv: kubeVirt(virtv1.KubeVirtConfiguration{}),
			want: func(*Settings) {}},
		{name: "gates added, disabled removed, emulation added", base: flags,
			kv: kubeVirt(virtv1.KubeVirtConfiguration{DeveloperConfiguration: &virtv1.DeveloperConfiguration{
				FeatureGates: []string{"Snapshot", "LiveMigration", "Snapshot"}, DisabledFeatureGates: []string{"HostDisk"}, UseEmulation: true}}),
			want: func(s *Settings) {
				s.FeatureGates, s.UseEmulation = []string{"LiveMigration", "Snapshot"}, true
			}},
		{name: "eviction and migrations replace the defaults", base: Defaults(),
			kv: kubeVirt(virtv1.KubeVirtConfiguration{EvictionStrategy: &live, MigrationConfiguration: &virtv1.MigrationConfiguration{
				BandwidthPerMigration: ptr.To(resource.MustParse("64Mi")), CompletionTimeoutPerGiB: ptr.To[int64](20),
				ParallelMigrationsPerCluster: ptr.To[uint32](1), ParallelOutboundMigrationsPerNode: ptr.To[uint32](3)}}),
			want: func(s *Settings) {
				s.EvictionStrategy = &live
				s.Migrations = Migrations{BandwidthPerMigration: resource.MustParse("64Mi"), CompletionTimeoutPerGiB: 20,
					ParallelMigrationsPerCluster: 1, ParallelOutboundMigrationsPerNode: 3}
			}},
		{name: "values out of bounds are ignored and named", base: Defaults(),
			kv: kubeVirt(virtv1.KubeVirtConfiguration{EvictionStrategy: &bogus, MigrationConfiguration: &virtv1.MigrationConfiguration{
				BandwidthPerMigration: ptr.To(resource.MustParse("-1")), CompletionTimeoutPerGiB: ptr.To[int64](0),
				ParallelMigrationsPerCluster: ptr.To[uint32](0), ParallelOutboundMigrationsPerNode: ptr.To[uint32](5000)}}),
			want: func(*Settings) {},
			errs: []string{"spec.configuration.evictionStrategy", "spec.configuration.migrations.bandwidthPerMigration",
				"spec.configuration.migrations.completionTimeoutPerGiB", "spec.configuration.migrations.parallelMigrationsPerCluster",
				"spec.configuration.migrations.parallelOutboundMigrationsPerNode"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.base
			want.FeatureGates = append([]string(nil), tc.base.FeatureGates...)
			tc.want(&want)
			got, errs := Resolve(tc.base, tc.kv)
			assert.Equal(t, want, got)
			var fields []string
			for _, e := range errs {
				fields = append(fields, e.Field)
			}
			assert.ElementsMatch(t, tc.errs, fields)
		})
	}
}

func TestEnabled(t *testing.T) {
	s := Settings{FeatureGates: []string{"HostDisk"}}
	assert.True(t, s.Enabled("HostDisk"))
	assert.False(t, s.Enabled("hostdisk"))
}

// A developerConfiguration with more gates than MaxFeatureGates is refused and, if it got in, ignored.
func TestTooManyGates(t *testing.T) {
	gates := make([]string, MaxFeatureGates+1)
	for i := range gates {
		gates[i] = "HostDisk"
	}
	got, errs := Resolve(Defaults(), kubeVirt(virtv1.KubeVirtConfiguration{DeveloperConfiguration: &virtv1.DeveloperConfiguration{FeatureGates: gates, UseEmulation: true}}))
	assert.Len(t, errs, 1)
	assert.Equal(t, "spec.configuration.developerConfiguration.featureGates", errs[0].Field)
	assert.False(t, got.Enabled("HostDisk"))
	assert.False(t, got.UseEmulation)
}
