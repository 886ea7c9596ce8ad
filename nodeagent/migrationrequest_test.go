package nodeagent

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// The settings a migration began with reach the launcher, in its units and within its bounds.
func TestMigrateRequestCarriesTheSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		mc   *virtv1.MigrationConfiguration
		want launcherv1.MigrateRequest
	}{
		{"none recorded", nil, launcherv1.MigrateRequest{UID: "u"}},
		{"unlimited", &virtv1.MigrationConfiguration{BandwidthPerMigration: ptr.To(resource.MustParse("0"))}, launcherv1.MigrateRequest{UID: "u"}},
		{"64Mi and 20 s per GiB", &virtv1.MigrationConfiguration{BandwidthPerMigration: ptr.To(resource.MustParse("64Mi")), CompletionTimeoutPerGiB: ptr.To[int64](20)},
			launcherv1.MigrateRequest{UID: "u", BandwidthMiBps: 64, CompletionTimeoutPerGiBSeconds: 20}},
		{"below a MiB rounds up", &virtv1.MigrationConfiguration{BandwidthPerMigration: ptr.To(resource.MustParse("100k"))}, launcherv1.MigrateRequest{UID: "u", BandwidthMiBps: 1}},
		{"a negative bandwidth is none", &virtv1.MigrationConfiguration{BandwidthPerMigration: ptr.To(resource.MustParse("-1Mi"))}, launcherv1.MigrateRequest{UID: "u"}},
		{"a bandwidth past 1Ti/s is 1Ti/s", &virtv1.MigrationConfiguration{BandwidthPerMigration: ptr.To(resource.MustParse("9E"))}, launcherv1.MigrateRequest{UID: "u", BandwidthMiBps: 1 << 20}},
		{"a timeout past the launcher's bound is clamped", &virtv1.MigrationConfiguration{CompletionTimeoutPerGiB: ptr.To[int64](1 << 40)},
			launcherv1.MigrateRequest{UID: "u", CompletionTimeoutPerGiBSeconds: launcherv1.MaxMigrationTimeoutSeconds}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, migrateRequest(&virtv1.VirtualMachineInstanceMigrationState{MigrationUID: "u", MigrationConfiguration: tc.mc}))
		})
	}
}
