package v1_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
)

// The freeze subresource's unfreezeTimeout, checked once for virt-api, the agent and virtctl.
func TestFreezeRequestFor(t *testing.T) {
	for _, d := range []*metav1.Duration{nil, {}} {
		req, err := launcherv1.FreezeRequestFor(d)
		assert.NoError(t, err)
		assert.Zero(t, req.UnfreezeTimeoutSeconds, "absent or 0: the launcher's default")
	}
	req, err := launcherv1.FreezeRequestFor(&metav1.Duration{Duration: 90 * time.Second})
	assert.NoError(t, err)
	assert.Equal(t, int64(90), req.UnfreezeTimeoutSeconds)
	for _, d := range []time.Duration{-time.Second, 500 * time.Millisecond, time.Hour + time.Second} {
		_, err := launcherv1.FreezeRequestFor(&metav1.Duration{Duration: d})
		assert.ErrorContains(t, err, "unfreezeTimeout: must be between 1s and 1h0m0s (0: 5m0s), got "+d.String())
	}
}
