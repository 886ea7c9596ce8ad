package apiserver

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
)

// KubeletLease answers launchers whose node agent is silent with their node's kubelet lease
// (launcherv1.KubeletLeasePath; rule 3 of docs/node-loss.md). The caller is whoever holds a token
// for launcherv1.KubeletLeaseAudience bound to a Pod: it learns when its own node's kubelet last
// renewed, nothing else. Anyone on the network may call, so every input is bounded: the body and
// how long it may take to arrive, tokens that cannot be for this audience (refused without a
// review), reviews of new tokens (per caller address and in all), calls per Pod (each one read of
// the lease), and each call's time.
type KubeletLease struct {
	// Client reads uncached (TokenReview, the lease).
	Client client.Client

	once    sync.Once
	mu      sync.Mutex            // makes limiterOf's get-or-add one step
	known   *cache.LRUExpireCache // sha256 of a reviewed token → reviewed
	perAddr *cache.LRUExpireCache // caller address → *rate.Limiter of its reviews
	perPod  *cache.LRUExpireCache // Pod UID → *rate.Limiter of its calls
	reviews *rate.Limiter
}

// reviewed is what a review of a token established.
type reviewed struct{ node, pod string }

// Bounds of the endpoint (a launcher asks every launcherv1.KubeletCheckInterval, with one token
// until the kubelet rotates it).
const (
	ReviewsPerSecond     = 20 // reviews of new tokens, in all (beyond: 429)
	reviewBurst          = 100
	ReviewsPerAddress    = 1 // per second and caller address
	reviewsAddressBurst  = 10
	CallsPerPodPerSecond = 1
	callsPodBurst        = 3
	reviewMemory         = 10 * time.Minute // at most: a token is remembered until it expires
	memorySize           = 8192
	kubeletLeaseTimeout  = 3 * time.Second // the body's arrival, and the whole call
)

func (k *KubeletLease) init() {
	k.once.Do(func() {
		k.known = cache.NewLRUExpireCache(memorySize)
		k.perAddr = cache.NewLRUExpireCache(memorySize)
		k.perPod = cache.NewLRUExpireCache(memorySize)
		k.reviews = rate.NewLimiter(ReviewsPerSecond, reviewBurst)
	})
}

// ServeHTTP answers one POST.
func (k *KubeletLease) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.init()
	if r.Method != http.MethodPost {
		writeError(w, r, apierrors.NewMethodNotSupported(coordinationv1.Resource("leases"), r.Method))
		return
	}
	// A body that trickles in must not hold one of the server's in-flight slots for long.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(kubeletLeaseTimeout))
	var req launcherv1.KubeletLeaseRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, launcherv1.MaxKubeletLeaseBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Token == "" {
		writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("body: a JSON {\"token\": …} of at most %d bytes, within %s, is expected", launcherv1.MaxKubeletLeaseBody, kubeletLeaseTimeout)))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), kubeletLeaseTimeout)
	defer cancel()
	who, err := k.review(ctx, req.Token, callerAddress(r))
	if err != nil {
		writeError(w, r, err)
		return
	}
	if !k.limiterOf(k.perPod, who.pod, CallsPerPodPerSecond, callsPodBurst).Allow() {
		writeError(w, r, apierrors.NewTooManyRequests(fmt.Sprintf("more than %d calls a second from one Pod", CallsPerPodPerSecond), 1))
		return
	}
	renewal, err := k.renewal(ctx, who.node)
	if err != nil {
		writeError(w, r, err)
		return
	}
	responsewriters.WriteRawJSON(http.StatusOK, launcherv1.KubeletLeaseResponse{Node: who.node, Renewal: renewal}, w)
}

// review establishes the token's Pod and node from a TokenReview for launcherv1.KubeletLeaseAudience,
// remembered until the token expires (at most reviewMemory: a token is bound to its Pod, which does
// not move). A token that cannot be for the audience is refused without a review.
func (k *KubeletLease) review(ctx context.Context, token, addr string) (reviewed, error) {
	sum := sha256.Sum256([]byte(token))
	key := string(sum[:])
	if who, ok := k.known.Get(key); ok {
		return who.(reviewed), nil
	}
	expires, err := claimsFor(token, launcherv1.KubeletLeaseAudience, time.Now())
	if err != nil {
		return reviewed{}, apierrors.NewUnauthorized(err.Error())
	}
	if !k.limiterOf(k.perAddr, addr, ReviewsPerAddress, reviewsAddressBurst).Allow() || !k.reviews.Allow() {
		return reviewed{}, apierrors.NewTooManyRequests(fmt.Sprintf("more than %d new tokens a second from one address, or %d in all, to review: ask again", ReviewsPerAddress, ReviewsPerSecond), 1)
	}
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{launcherv1.KubeletLeaseAudience}}}
	if err := k.Client.Create(ctx, review); err != nil {
		return reviewed{}, apierrors.NewServiceUnavailable("the token cannot be reviewed now: ask again")
	}
	who, err := reviewedPod(review.Status)
	if err != nil {
		return reviewed{}, apierrors.NewUnauthorized(err.Error())
	}
	k.known.Add(key, who, min(reviewMemory, time.Until(expires)))
	return who, nil
}

// claimsFor reads a JWT's claims without checking its signature (the review does): the token must
// name audience and not have expired. It returns the expiry.
func claimsFor(token, audience string, now time.Time) (time.Time, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, errors.New("token: not a JWT")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, errors.New("token: not a JWT")
	}
	var claims struct {
		Aud audiences `json:"aud"`
		Exp int64     `json:"exp"`
	}
	if err := json.Unmarshal(raw, &claims); err != nil {
		return time.Time{}, errors.New("token: not a JWT")
	}
	exp := time.Unix(claims.Exp, 0)
	switch {
	case !slices.Contains(claims.Aud, audience):
		return time.Time{}, fmt.Errorf("token: not for audience %s", audience)
	case !exp.After(now):
		return time.Time{}, errors.New("token: expired")
	}
	return exp, nil
}

// audiences is a JWT's aud: one string or a list.
type audiences []string

func (a *audiences) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = []string{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(a))
}

// callerAddress is the host of the request's remote address.
func callerAddress(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// limiterOf is key's limiter in c (made with rate and burst, kept for reviewMemory).
func (k *KubeletLease) limiterOf(c *cache.LRUExpireCache, key string, perSecond float64, burst int) *rate.Limiter {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l, ok := c.Get(key); ok {
		return l.(*rate.Limiter)
	}
	l := rate.NewLimiter(rate.Limit(perSecond), burst)
	c.Add(key, l, reviewMemory)
	return l
}

// reviewedPod checks a review: authenticated, for the audience, a ServiceAccount's token bound to
// a Pod with one node.
func reviewedPod(st authenticationv1.TokenReviewStatus) (reviewed, error) {
	pods, uids := st.User.Extra[serviceaccount.PodNameKey], st.User.Extra[serviceaccount.PodUIDKey]
	nodes := st.User.Extra[serviceaccount.NodeNameKey]
	switch {
	case !st.Authenticated:
		return reviewed{}, errors.New("token: not authenticated")
	case !slices.Contains(st.Audiences, launcherv1.KubeletLeaseAudience):
		return reviewed{}, fmt.Errorf("token: not for audience %s", launcherv1.KubeletLeaseAudience)
	case !strings.HasPrefix(st.User.Username, serviceaccount.ServiceAccountUsernamePrefix):
		return reviewed{}, errors.New("token: not a ServiceAccount's")
	case len(pods) != 1 || len(uids) != 1 || uids[0] == "":
		return reviewed{}, errors.New("token: not bound to a Pod")
	case len(nodes) != 1 || nodes[0] == "":
		return reviewed{}, errors.New("token: names no node")
	}
	return reviewed{node: nodes[0], pod: uids[0]}, nil
}

// renewal is node's kubelet lease's renewal as an uncached read finds it now ("" when it has none).
func (k *KubeletLease) renewal(ctx context.Context, node string) (string, error) {
	lease := &coordinationv1.Lease{}
	err := k.Client.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: node}, lease)
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", apierrors.NewServiceUnavailable(fmt.Sprintf("read the kubelet lease of node %s: %v", node, err))
	}
	return heartbeatv1.Renewal(lease), nil
}
