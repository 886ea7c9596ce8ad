package v1

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestGuestMemory(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	req := func(s string) ResourceRequirements {
		return ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: *q(s)}}
	}
	for _, tc := range []struct {
		name, want, err string
		spec            DomainSpec
	}{
		{name: "requests", spec: DomainSpec{Resources: req("64M")}, want: "64M"},
		{name: "guest wins over requests", spec: DomainSpec{Resources: req("1Gi"), Memory: &Memory{Guest: q("512Mi")}}, want: "512Mi"},
		{name: "limits alone: the request defaults to the limit", spec: DomainSpec{Resources: ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: *q("1Gi")}}}, want: "1Gi"},
		{name: "nothing", spec: DomainSpec{}, err: "spec.domain.resources.requests.memory: required"},
		{name: "zero guest", spec: DomainSpec{Resources: req("64M"), Memory: &Memory{Guest: q("0")}}, err: "spec.domain.memory.guest: must be positive"},
		{name: "zero request", spec: DomainSpec{Resources: req("0")}, err: "spec.domain.resources.requests.memory: must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.spec.GuestMemory()
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.String())
		})
	}
}

func TestVCPUs(t *testing.T) {
	for _, tc := range []struct {
		name string
		cpu  *CPU
		want int
	}{
		{"no cpu", nil, 1},
		{"cores only", &CPU{Cores: 2}, 2},
		{"full topology", &CPU{Sockets: 2, Cores: 2, Threads: 2}, 8},
		{"zeros count as one", &CPU{Sockets: 0, Cores: 3, Threads: 0}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := DomainSpec{CPU: tc.cpu}
			assert.Equal(t, tc.want, d.VCPUs())
		})
	}
}
