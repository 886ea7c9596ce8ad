package v1

import (
	"fmt"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// Telling a control-plane outage from a node's isolation (docs/node-loss.md has the argument).
// An agent whose renewals fail asks its peers over the agents' mutual TLS whether they cannot reach
// the apiserver either; while one says so it keeps vouching for its guests. Every such answer
// leaves a mark on the answering agent's lease (Confirmed), and virt-controller fails no node over
// while another agent's heartbeat has lapsed, or within FailoverWindow of a lapse ending or a mark.
const (
	// LapseGap: a heartbeat virt-controller has not seen renewed for longer than this has lapsed.
	LapseGap = 15 * time.Second
	// AnswerAfter is how old an agent's own last renewal (counted from its start) must be before it
	// answers a peer "I cannot reach the control plane either": longer than LapseGap by a renewal's
	// longest flight and a margin for virt-controller's view, so that the answering agent's lease
	// looks lapsed to virt-controller by then, or has been renewed with a mark (MarkAfter).
	AnswerAfter = LapseGap + RenewInterval + 5*time.Second
	// MarkAfter: a renewal that starts when the agent's last one is older than this carries a mark
	// (AnnotationConfirmed) whether or not it answered yet, since it may answer while the renewal is
	// in flight.
	MarkAfter = AnswerAfter - RenewInterval
	// ConfirmValidity is how long a peer's "I cannot either" lets an agent vouch, counted from when it
	// asked.
	ConfirmValidity = 10 * time.Second
	// AskAfter is how old the agent's last renewal is when it starts asking its peers (one missed
	// renewal), and AskInterval how often it asks (each question bounded by it).
	AskAfter    = RenewInterval
	AskInterval = 2 * time.Second
	// FailoverWindow is how long virt-controller waits after seeing another agent's lapse end or its
	// Confirmed mark move before it fails any node over: longer than a confirmation keeps guests
	// running (ConfirmValidity + the launchers' AgentSilenceLimit + their check).
	FailoverWindow = 70 * time.Second
	// MaxLapse bounds an outage the guests outlive: an agent answers "cut off too" only while its own
	// lapse is at most this long, and vouches on its peers' word only while its own is.
	MaxLapse = 15 * time.Minute
	// ConfirmHorizon is how long after its last renewal an agent's confirmations may still keep
	// guests running (its own or a peer's): past it, a lapsed heartbeat neither blocks failovers nor
	// vouches for its own node's guests.
	ConfirmHorizon = MaxLapse + FailoverWindow
	// Quorum is how many distinct peers must answer "cut off too" in one round of questions (fewer
	// when the agent has fewer peers): one compromised node alone cannot keep another's guests
	// running while that node is failed over.
	Quorum = 2

	// AnnotationConfirmed counts the renewals after which the agent had told a peer it could not
	// reach the control plane (and its first renewal after a start): a mark virt-controller sees.
	AnnotationConfirmed = "podvirt.io/confirmed"
	// AnnotationPeers is how many other agents' leases the agent listed in the renewal that wrote it;
	// "0": the agent vouches alone for its guests through an outage, so nothing fails it over.
	AnnotationPeers = "podvirt.io/peers"
	// AnnotationAddress is where the agent serves its peers (host:port of its mutual-TLS port). Only
	// agents that publish one are asked, and only their lapses and marks hold failovers back.
	AnnotationAddress = "podvirt.io/agent-address"
)

// Sighting is what an observer (virt-controller) saw of one agent lease, by its own clock.
type Sighting struct {
	// Node is the lease's node.
	Node string
	// Changed is when the observer last saw the lease's Renewal change.
	Changed time.Time
	// GapEnded is when it last saw a renewal that came more than LapseGap after the one before.
	GapEnded time.Time
	// Marked is when it last saw AnnotationConfirmed change (or first saw the lease).
	Marked time.Time
	// Peers is AnnotationPeers as last seen; -1 when absent (an agent that never vouches alone).
	Peers int
	// Answers: the lease publishes AnnotationAddress (the agent answers its peers).
	Answers bool
}

// Peers reads AnnotationPeers of lease: -1 when absent or not a count.
func Peers(lease *coordinationv1.Lease) int {
	n, err := strconv.Atoi(lease.Annotations[AnnotationPeers])
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// FailoverBlocked tells whether node's instances may not be failed over at now although its own
// heartbeat is stale, and why: its agent vouched alone at its last renewal; or, until its own lapse
// passes ConfirmHorizon (after which its guests are stopped whatever its peers say), another
// answering agent's heartbeat has lapsed for at most ConfirmHorizon (its node may be cut off
// together with this one, and confirm it), or within FailoverWindow another lapse ended or another
// agent marked a confirmation. wait is when to look again. others holds every other agent lease's
// sighting.
func FailoverBlocked(node Sighting, others []Sighting, now time.Time) (blocked bool, why string, wait time.Duration) {
	if node.Peers == 0 {
		return true, fmt.Sprintf("the node agent on %s listed no other agent at its last renewal, so it keeps its guests running through any outage: fail them over by hand", node.Node), FailoverWindow
	}
	if now.Sub(node.Changed) > ConfirmHorizon {
		return false, "", 0
	}
	for _, o := range others {
		if !o.Answers {
			continue
		}
		switch {
		case now.Sub(o.Changed) > ConfirmHorizon: // it confirms nothing any more
		case now.Sub(o.Changed) > LapseGap:
			return true, fmt.Sprintf("the node agent on %s has not renewed its heartbeat for %s either: the two nodes may be cut off together", o.Node, now.Sub(o.Changed).Round(time.Second)), LapseGap
		case now.Sub(o.GapEnded) < FailoverWindow:
			return true, fmt.Sprintf("the node agent on %s renewed its heartbeat after a lapse %s ago", o.Node, now.Sub(o.GapEnded).Round(time.Second)), o.GapEnded.Add(FailoverWindow).Sub(now) + time.Second
		case now.Sub(o.Marked) < FailoverWindow:
			return true, fmt.Sprintf("the node agent on %s told a peer %s ago that it could not reach the control plane", o.Node, now.Sub(o.Marked).Round(time.Second)), o.Marked.Add(FailoverWindow).Sub(now) + time.Second
		}
	}
	return false, "", 0
}
