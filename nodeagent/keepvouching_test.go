package nodeagent

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/podvirt/podvirt/nodeagent/launcherclient"
	"github.com/podvirt/podvirt/nodeagent/launchertest"
)

// While a sync is served the agent asks for the status, each request with the vouch of its moment,
// and none while it does not vouch; stop returns once the asking is over.
func TestKeepVouching(t *testing.T) {
	dir := t.TempDir()
	l, err := launchertest.Start(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })

	var mu sync.Mutex
	vouching, until := true, time.Duration(1000)
	r := &Reconciler{
		Dial:         func(*corev1.Pod) Launcher { return launcherclient.New(dir) },
		PollInterval: 10 * time.Millisecond,
		Vouch: func() (bool, time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			until++
			return vouching, until
		},
	}
	stop := r.keepVouching(launcherclient.WithVouchedUntil(context.Background(), 7), &corev1.Pod{})
	require.Eventually(t, func() bool { return len(l.Vouches()) >= 3 }, 5*time.Second, 5*time.Millisecond)
	mu.Lock()
	vouching = false
	mu.Unlock()
	n := len(l.Vouches()) // one request may be under way
	assert.Never(t, func() bool { return len(l.Vouches()) > n+1 }, 100*time.Millisecond, 10*time.Millisecond, "asked while not vouching")
	stop()
	seen := l.Vouches()
	last := 0
	for _, v := range seen {
		u, err := strconv.Atoi(v)
		require.NoError(t, err, "every request carries a vouch")
		assert.Greater(t, u, last, "each its own, not the one the context held (7)")
		last = u
	}
	assert.Len(t, l.Vouches(), len(seen), "nothing asked after stop")
}
