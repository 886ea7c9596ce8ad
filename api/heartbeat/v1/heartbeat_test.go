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

func TestStale(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.MicroTime { m := metav1.NewMicroTime(now.Add(-d)); return &m }
	cases := []struct {
		name  string
		spec  coordinationv1.LeaseSpec
		stale bool
	}{
		{"never renewed", coordinationv1.LeaseSpec{}, true},
		{"renewed just now", coordinationv1.LeaseSpec{RenewTime: at(0)}, false},
		{"renewed within threshold", coordinationv1.LeaseSpec{RenewTime: at(39 * time.Second)}, false},
		{"renewed past threshold", coordinationv1.LeaseSpec{RenewTime: at(41 * time.Second)}, true},
		{"acquired only, recent", coordinationv1.LeaseSpec{AcquireTime: at(5 * time.Second)}, false},
		{"renew time wins over acquire time", coordinationv1.LeaseSpec{AcquireTime: at(0), RenewTime: at(time.Minute)}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lease := &coordinationv1.Lease{Spec: tc.spec}
			if got := heartbeatv1.Stale(lease, now, heartbeatv1.LeaseDuration); got != tc.stale {
				t.Fatalf("Stale = %v, want %v", got, tc.stale)
			}
		})
	}
}
