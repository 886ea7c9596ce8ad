package v1

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// The kubelet-lease check (rule 3 of docs/node-loss.md): a launcher whose node agent has been silent
// for KubeletCheckAfter asks virt-api whether its node's kubelet still renews its lease
// (kube-node-lease/NODE), and keeps its guest past AgentSilenceLimit while it does. An agent that is
// merely away (a crash loop, a rollout that hangs, an image it cannot pull) then stops no guest,
// while a node that is cut off still fences: its launchers reach no virt-api, and virt-controller
// fails a node over only once it has also seen that node's kubelet lease unchanged for its threshold.
//
// The launcher proves which node it runs on with a ServiceAccount token the kubelet projects into
// the compute container for KubeletLeaseAudience only: the kube-apiserver refuses that token, so a
// guest that escapes into qemu gains no API access by it. virt-api reviews it (TokenReview with that
// audience; the token is bound to the Pod, and its node claim names the node) and answers with that
// node's lease as an uncached read finds it; never another node's.
const (
	// KubeletLeasePath is virt-api's endpoint (POST KubeletLeaseRequest → KubeletLeaseResponse), served
	// outside the aggregated API: the caller authenticates with the token in the body.
	KubeletLeasePath = "/podvirt/v1/kubelet-lease"
	// KubeletLeaseAudience is the only audience of the projected token.
	KubeletLeaseAudience = "podvirt.io/kubelet-lease"
	// KubeletTokenVolume is the projected volume holding the token, mounted in the compute container
	// at KubeletTokenDir; the token is the file KubeletTokenFile in it.
	KubeletTokenVolume = "podvirt-kubelet-lease"
	KubeletTokenDir    = "/var/run/podvirt/kubelet-lease"
	KubeletTokenFile   = "token"
	// KubeletTokenSeconds is the token's lifetime; the kubelet replaces it after 80% of it.
	KubeletTokenSeconds = 3600
	// MaxKubeletLeaseBody bounds a request body (a token is a few KiB) and a response body.
	MaxKubeletLeaseBody = 16 << 10
	// KubeletCheckAfter is how long the agent must have been silent before the launcher asks;
	// KubeletCheckInterval how often it asks then, each call bounded by KubeletCheckTimeout.
	KubeletCheckAfter    = 10 * time.Second
	KubeletCheckInterval = 5 * time.Second
	KubeletCheckTimeout  = 4 * time.Second
)

// KubeletLeaseRequest asks for the kubelet lease of the caller's node.
type KubeletLeaseRequest struct {
	// Token is the projected ServiceAccount token (KubeletLeaseAudience).
	Token string `json:"token"`
}

// KubeletLeaseResponse is the caller's node and its kubelet lease's renewal as virt-api read it
// (uncached, after the request arrived); Renewal is only compared with earlier answers, never with a
// clock. "" when the node has no lease.
type KubeletLeaseResponse struct {
	Node    string `json:"node"`
	Renewal string `json:"renewal"`
}

// NodeCheck tells a launcher where to ask (SyncRequest): virt-api's URL and the CA bundle its
// serving certificate chains to. A launcher without it fences after AgentSilenceLimit of silence
// alone, as before rule 3.
type NodeCheck struct {
	URL string `json:"url"`
	CA  []byte `json:"ca"`
	// ServerName is the name the server's certificate must be for (URL's host when empty: a URL
	// may name an IP address).
	ServerName string `json:"serverName,omitempty"`
}

// Digest identifies a NodeCheck (Status.NodeCheck): the agent sends its own again when the launcher
// reports another (virt-api's CA rotated).
func (n NodeCheck) Digest() string {
	sum := sha256.Sum256(append([]byte(n.URL+"\x00"+n.ServerName+"\x00"), n.CA...))
	return hex.EncodeToString(sum[:8])
}

// KubeletSeen is the launcher's evidence from two answers: a read that started at start and saw
// renewal, followed by one that saw a different renewal, proves that the kubelet renewed after
// start (virt-api reads uncached, after each request arrived). So start, not the time of the later
// answer, is when the kubelet was last known alive.
type KubeletSeen struct {
	// Renewal is the last answer's; Start when the call that got it started (the launcher's clock).
	Renewal string
	Start   time.Duration
	// Alive is the start of the call before the one that saw the renewal change; 0: never seen.
	Alive time.Duration
}

// Observe folds in an answer (renewal) of a call that started at start.
func (k KubeletSeen) Observe(renewal string, start time.Duration) KubeletSeen {
	if k.Start != 0 && renewal != k.Renewal { // a failed call in between changes nothing
		k.Alive = k.Start
	}
	k.Renewal, k.Start = renewal, start
	return k
}

// Fence is the launcher's rule, with limit AgentSilenceLimit: destroy the guest once the agent has
// been silent for limit and its node's kubelet has not been known alive for as long. A node that
// virt-controller fails over has had its kubelet lease unchanged for its threshold (more than limit
// plus the launcher's poll), so its launchers have fenced before.
func Fence(limit, agentSilent, sinceKubeletAlive time.Duration, kubeletKnown bool) bool {
	return agentSilent >= limit && (!kubeletKnown || sinceKubeletAlive >= limit)
}
