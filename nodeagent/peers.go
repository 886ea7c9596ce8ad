package nodeagent

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
)

// Peer is another node's agent, as its lease names it.
type Peer struct {
	Node, Address string
}

// maxAsked bounds the peers asked at once in one round of questions.
const maxAsked = 3

// listPeers lists the other agents' leases: every lease of the namespace named heartbeatv1.LeasePrefix
// + node, with the address it serves its peers on (a peer without one counts, but is not asked).
func (h *Heartbeat) listPeers(ctx context.Context) ([]Peer, error) {
	leases := &metav1.PartialObjectMetadataList{}
	leases.SetGroupVersionKind(coordinationv1.SchemeGroupVersion.WithKind("LeaseList"))
	if err := h.Client.List(ctx, leases, client.InNamespace(h.Namespace)); err != nil {
		return nil, fmt.Errorf("list the agents' leases: %w", err)
	}
	var peers []Peer
	for _, l := range leases.Items {
		node, ok := strings.CutPrefix(l.Name, heartbeatv1.LeasePrefix)
		if !ok || node == h.NodeName || node == "" {
			continue
		}
		peers = append(peers, Peer{Node: node, Address: l.Annotations[heartbeatv1.AnnotationAddress]})
	}
	return peers, nil
}

// AnswerPeer is the answer to a peer's question (agentv1.PathPeerContact): cut off when this agent's
// own last renewal is older than heartbeatv1.AnswerAfter but not older than heartbeatv1.MaxLapse
// (an agent that has not renewed since it started answers no). Each such answer is marked on the
// lease by the renewal in flight, if any (it started past heartbeatv1.MarkAfter), or the next.
func (h *Heartbeat) AnswerPeer() agentv1.PeerContact {
	now := h.Clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	lapse := now.Sub(h.renewed)
	cut := !h.renewed.IsZero() && lapse > heartbeatv1.AnswerAfter && lapse <= heartbeatv1.MaxLapse
	if cut {
		h.answered++
	}
	return agentv1.PeerContact{CutOff: cut}
}

// askPeers asks, every heartbeatv1.AskInterval while the last renewal is older than
// heartbeatv1.AskAfter, up to maxAsked peers at once whether they are cut off too; a yes from
// heartbeatv1.Quorum of them (from every one asked, when fewer are asked) lets the agent vouch for
// heartbeatv1.ConfirmValidity from when it asked. Returns when ctx ends, with every question
// answered or abandoned.
func (h *Heartbeat) askPeers(ctx context.Context) {
	if h.Ask == nil {
		return
	}
	tick := time.NewTicker(heartbeatv1.AskInterval)
	defer tick.Stop()
	next, lastSaid := 0, ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		asked := h.Clock.Now()
		h.mu.Lock()
		peers, lapsing := h.peers, !h.renewed.IsZero() && asked.Sub(h.renewed) > heartbeatv1.AskAfter
		h.mu.Unlock()
		// Peers without an address are not asked, but count: one peer's word does not stand for two.
		if !lapsing || len(peers) == 0 {
			lastSaid = ""
			continue
		}
		var chosen []Peer
		for i := 0; i < len(peers) && len(chosen) < maxAsked; i++ {
			if p := peers[(next+i)%len(peers)]; p.Address != "" {
				chosen = append(chosen, p)
			}
		}
		next = (next + maxAsked) % len(peers)
		by, said := h.ask(ctx, chosen)
		if confirms(len(by), len(peers)) {
			h.mu.Lock()
			h.confirmed = asked
			h.mu.Unlock()
		}
		if said != lastSaid {
			log.FromContext(ctx).Info("The heartbeat is not renewed; asked the peer agents", "answers", said)
			lastSaid = said
		}
	}
}

// confirms tells whether yes answers, of an agent with peers peers, confirm an outage:
// heartbeatv1.Quorum of them, or every one when it has fewer.
func confirms(yes, peers int) bool {
	return yes > 0 && yes >= min(heartbeatv1.Quorum, peers)
}

// ask asks the chosen peers at once, each question bounded by heartbeatv1.AskInterval, and returns
// the peers that are cut off too and a summary of the answers.
func (h *Heartbeat) ask(ctx context.Context, chosen []Peer) ([]string, string) {
	ctx, cancel := context.WithTimeout(ctx, heartbeatv1.AskInterval)
	defer cancel()
	answers := make([]string, len(chosen))
	cutOff := make([]bool, len(chosen))
	var wg sync.WaitGroup
	for i, p := range chosen {
		wg.Go(func() {
			cut, err := h.Ask(ctx, p)
			switch {
			case err != nil:
				answers[i] = p.Node + ": unreachable"
			case cut:
				answers[i], cutOff[i] = p.Node+": cut off too", true
			default:
				answers[i] = p.Node + ": reaches the control plane"
			}
		})
	}
	wg.Wait()
	var by []string
	for i, c := range cutOff {
		if c {
			by = append(by, chosen[i].Node)
		}
	}
	if len(chosen) == 0 {
		return nil, "no peer has an address"
	}
	return by, strings.Join(answers, ", ")
}

// PeerAsker asks a peer's agent over the agents' mutual TLS: tlsFor gives the client configuration
// that accepts only that node's agent (AgentTLS.PeerConfig).
func PeerAsker(tlsFor func(node string) (*tls.Config, error)) func(ctx context.Context, p Peer) (bool, error) {
	return func(ctx context.Context, p Peer) (bool, error) {
		cfg, err := tlsFor(p.Node)
		if err != nil {
			return false, fmt.Errorf("peer %s: %w", p.Node, err)
		}
		tr := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true, MaxResponseHeaderBytes: agentv1.MaxPeerContactBytes * 4}
		defer tr.CloseIdleConnections()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+p.Address+agentv1.PathPeerContact, nil)
		if err != nil {
			return false, fmt.Errorf("peer %s: %w", p.Node, err)
		}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return false, fmt.Errorf("peer %s: %w", p.Node, err)
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("peer %s: %s", p.Node, resp.Status)
		}
		var pc agentv1.PeerContact
		if err := json.NewDecoder(io.LimitReader(resp.Body, agentv1.MaxPeerContactBytes)).Decode(&pc); err != nil {
			return false, fmt.Errorf("peer %s: answer: %w", p.Node, err)
		}
		return pc.CutOff, nil
	}
}

// peerContact answers another node's agent (only node identities other than this node's own, when
// served over mutual TLS).
func (s *SubresourceServer) peerContact(w http.ResponseWriter, r *http.Request) {
	if s.AnswerPeer == nil {
		writeError(w, http.StatusNotFound, "this agent answers no peers")
		return
	}
	if node, agent := agentv1.NodeOf(agentv1.Caller(r.TLS)); s.TLSConfig != nil && (!agent || node == s.NodeName) {
		writeError(w, http.StatusForbidden, fmt.Sprintf("only other nodes' agents ask this, not %q", agentv1.Caller(r.TLS)))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.AnswerPeer())
}
