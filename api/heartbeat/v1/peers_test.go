package v1_test

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
)

func TestFailoverBlocked(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	with := func(s heartbeatv1.Sighting, f func(*heartbeatv1.Sighting)) heartbeatv1.Sighting { f(&s); return s }
	stale := heartbeatv1.Sighting{Node: "n2", Changed: ago(90 * time.Second), Marked: ago(time.Hour), Peers: 1}
	healthy := heartbeatv1.Sighting{Node: "n1", Changed: ago(5 * time.Second), Marked: ago(time.Hour), Peers: 1, Answers: true}
	lapsed := with(healthy, func(s *heartbeatv1.Sighting) { s.Changed = ago(16 * time.Second) })
	for _, tc := range []struct {
		name    string
		node    heartbeatv1.Sighting
		others  []heartbeatv1.Sighting
		blocked bool
		wait    time.Duration
	}{
		{"others renew, marked nothing lately", stale, []heartbeatv1.Sighting{healthy}, false, 0},
		{"no other agent", stale, nil, false, 0},
		{"an agent that never said how many peers it had", with(stale, func(s *heartbeatv1.Sighting) { s.Peers = -1 }), []heartbeatv1.Sighting{healthy}, false, 0},
		{"the agent listed no peer", with(stale, func(s *heartbeatv1.Sighting) { s.Peers = 0 }), []heartbeatv1.Sighting{healthy}, true, heartbeatv1.FailoverWindow},
		{"another agent lapsed too", stale, []heartbeatv1.Sighting{healthy, lapsed}, true, heartbeatv1.LapseGap},
		{"a lapsed agent that answers no peers", stale, []heartbeatv1.Sighting{with(lapsed, func(s *heartbeatv1.Sighting) { s.Answers = false })}, false, 0},
		{"an agent lapsed past the horizon confirms nothing", stale, []heartbeatv1.Sighting{with(lapsed, func(s *heartbeatv1.Sighting) { s.Changed = ago(heartbeatv1.ConfirmHorizon + time.Second) })}, false, 0},
		{"the node itself stale past the horizon: its guests are stopped whatever its peers say", with(stale, func(s *heartbeatv1.Sighting) { s.Changed = ago(heartbeatv1.ConfirmHorizon + time.Second) }), []heartbeatv1.Sighting{lapsed}, false, 0},
		{"alone past the horizon: still never", with(stale, func(s *heartbeatv1.Sighting) { s.Changed = ago(time.Hour); s.Peers = 0 }), nil, true, heartbeatv1.FailoverWindow},
		{"another agent renewing at LapseGap", stale, []heartbeatv1.Sighting{with(healthy, func(s *heartbeatv1.Sighting) { s.Changed = ago(heartbeatv1.LapseGap) })}, false, 0},
		{"another agent's lapse ended 10 s ago", stale, []heartbeatv1.Sighting{with(healthy, func(s *heartbeatv1.Sighting) { s.GapEnded = ago(10 * time.Second) })}, true, heartbeatv1.FailoverWindow - 9*time.Second},
		{"another agent's lapse ended a window ago", stale, []heartbeatv1.Sighting{with(healthy, func(s *heartbeatv1.Sighting) { s.GapEnded = ago(heartbeatv1.FailoverWindow) })}, false, 0},
		{"another agent marked 69 s ago", stale, []heartbeatv1.Sighting{with(healthy, func(s *heartbeatv1.Sighting) { s.Marked = ago(69 * time.Second) })}, true, 2 * time.Second},
	} {
		blocked, why, wait := heartbeatv1.FailoverBlocked(tc.node, tc.others, now)
		if blocked != tc.blocked || wait != tc.wait || blocked != (why != "") {
			t.Errorf("%s: blocked %v (%q), wait %s; want blocked %v, wait %s", tc.name, blocked, why, wait, tc.blocked, tc.wait)
		}
	}
	// A guest vouched for by a confirmation asked at q stops by q + ConfirmValidity + the launcher's
	// limit; the window, counted from a mark made after q, outlasts that.
	if heartbeatv1.FailoverWindow <= heartbeatv1.ConfirmValidity+launcherv1.AgentSilenceLimit+5*time.Second {
		t.Errorf("FailoverWindow %s does not outlast a confirmation's guests", heartbeatv1.FailoverWindow)
	}
	if heartbeatv1.ConfirmHorizon < heartbeatv1.MaxLapse+heartbeatv1.ConfirmValidity+launcherv1.AgentSilenceLimit+5*time.Second {
		t.Errorf("ConfirmHorizon %s does not outlast the last confirmation's guests", heartbeatv1.ConfirmHorizon)
	}
	// A peer whose lapse lets it answer yes looks lapsed to virt-controller by then (its last renewal
	// landed at most RenewInterval after it started), with a margin for the controller's view.
	if heartbeatv1.AnswerAfter-heartbeatv1.RenewInterval <= heartbeatv1.LapseGap || heartbeatv1.MarkAfter+heartbeatv1.RenewInterval > heartbeatv1.AnswerAfter {
		t.Error("AnswerAfter and MarkAfter do not cover a renewal in flight")
	}
	// Through an outage an agent stops vouching on its own at VouchLimit; its peers answer from
	// AnswerAfter after their own last renewal, up to RenewInterval later: its launchers must not
	// fence meanwhile.
	if heartbeatv1.AnswerAfter+heartbeatv1.RenewInterval-heartbeatv1.VouchLimit+heartbeatv1.AskInterval+5*time.Second >= launcherv1.AgentSilenceLimit {
		t.Error("peers answer too late for the launchers")
	}
	if heartbeatv1.AskAfter >= heartbeatv1.VouchLimit || heartbeatv1.LapseGap <= heartbeatv1.RenewInterval {
		t.Error("agents must ask before they stop vouching, and a lapse is more than one renewal")
	}
}

func TestPeers(t *testing.T) {
	for v, want := range map[string]int{"": -1, "0": 0, "3": 3, "-1": -1, "x": -1} {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
		if v != "" {
			l.Annotations[heartbeatv1.AnnotationPeers] = v
		}
		if got := heartbeatv1.Peers(l); got != want {
			t.Errorf("Peers(%q) = %d, want %d", v, got, want)
		}
	}
}
