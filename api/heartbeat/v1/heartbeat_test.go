package v1_test

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
)

func TestLeaseName(t *testing.T) {
	if got := heartbeatv1.LeaseName("node-a"); got != "virt-handler-node-a" {
		t.Fatalf("LeaseName(node-a) = %q", got)
	}
}

// The rule uses the observer's clock only: how old the node's own renew time is does not matter,
// only when the observer saw it change and when its own contact last resumed.
func TestStale(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	for _, tc := range []struct {
		name          string
		seen, contact time.Time
		stale         bool
	}{
		{"renewal seen just now", ago(0), time.Time{}, false},
		{"renewal seen within the threshold", ago(39 * time.Second), time.Time{}, false},
		{"renewal seen past the threshold", ago(41 * time.Second), time.Time{}, true},
		{"old renewal, but contact resumed recently (an outage)", ago(5 * time.Minute), ago(10 * time.Second), false},
		{"old renewal, contact back for longer than the threshold", ago(5 * time.Minute), ago(41 * time.Second), true},
	} {
		if got := heartbeatv1.Stale(tc.seen, tc.contact, now, heartbeatv1.LeaseDuration); got != tc.stale {
			t.Errorf("%s: Stale = %v, want %v", tc.name, got, tc.stale)
		}
	}
}

func TestRenewal(t *testing.T) {
	at := func(s int) *metav1.MicroTime {
		m := metav1.NewMicroTime(time.Date(2026, 1, 1, 12, 0, s, 0, time.UTC))
		return &m
	}
	holder := func(s string) *string { return &s }
	if got := heartbeatv1.Renewal(&coordinationv1.Lease{}); got != "" {
		t.Errorf("never renewed: %q", got)
	}
	a := heartbeatv1.Renewal(&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: holder("p1"), RenewTime: at(1), AcquireTime: at(0)}})
	b := heartbeatv1.Renewal(&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: holder("p1"), RenewTime: at(2), AcquireTime: at(0)}})
	c := heartbeatv1.Renewal(&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: holder("p2"), RenewTime: at(1)}})
	if a == b || a == c || a == "" {
		t.Errorf("renewals must differ by renew time and holder: %q %q %q", a, b, c)
	}
}
