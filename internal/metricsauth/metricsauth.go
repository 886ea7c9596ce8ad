// Package metricsauth guards a component's metrics endpoint, which anything on the Pod network can
// reach: controller-runtime's filter (a TokenReview and a SubjectAccessReview for the /metrics path)
// behind two bounds, so that callers cannot turn the endpoint into load on the kube-apiserver that
// starves the component's own requests (the node agent's heartbeat): a bearer value that is not
// shaped like a token is refused without a review, and the reviews go through a client of their
// own, throttled to ReviewQPS.
package metricsauth

import (
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ReviewQPS and ReviewBurst bound the reviews one component asks of the kube-apiserver, TokenReviews
// and SubjectAccessReviews together (results are cached per token for a minute); at most
// MaxPending requests wait for one, more are answered 429 at once.
const (
	ReviewQPS   = 5
	ReviewBurst = 10
	MaxPending  = 16
)

// maxToken bounds a bearer token's length (a ServiceAccount token is about 1 KiB).
const maxToken = 16 << 10

// Filter is a metricsserver.FilterProvider: see the package comment.
func Filter(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	throttled := rest.CopyConfig(cfg)
	throttled.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(ReviewQPS, ReviewBurst) // shared by both review clients
	inner, err := filters.WithAuthenticationAndAuthorization(throttled, hc)
	if err != nil {
		return nil, err
	}
	return func(log logr.Logger, handler http.Handler) (http.Handler, error) {
		reviewed, err := inner(log, handler)
		if err != nil {
			return nil, err
		}
		pending := make(chan struct{}, MaxPending)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !tokenShaped(r.Header.Get("Authorization")) {
				http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
				return
			}
			select {
			case pending <- struct{}{}:
				defer func() { <-pending }()
			default:
				http.Error(w, "Too many requests waiting for review", http.StatusTooManyRequests)
				return
			}
			reviewed.ServeHTTP(w, r)
		}), nil
	}, nil
}

// tokenShaped reports whether an Authorization header carries a bearer value shaped like a JWT
// (three dot-separated base64url parts, bounded): ServiceAccount and OIDC tokens. Opaque tokens
// (bootstrap tokens, a webhook authenticator's) are refused here: scrape with a ServiceAccount.
func tokenShaped(header string) bool {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || len(token) > maxToken {
		return false
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.IndexFunc(p, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '=')
		}) >= 0 {
			return false
		}
	}
	return true
}
