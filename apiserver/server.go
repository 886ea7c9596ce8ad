package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"slices"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/union"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/util/compatibility"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	"github.com/podvirt/podvirt/internal/clusterconfig"
)

// Versions of subresources.kubevirt.io this server serves, the preferred first.
var Versions = []string{"v1", "v1alpha3"}

// Options configures the server.
type Options struct {
	// BindPort is the HTTPS port.
	BindPort int
	// CertFile and KeyFile are the serving certificate (written by the certificate rotator; they must
	// exist at start and are reloaded when they change).
	CertFile, KeyFile string
	// Kubeconfig reaches the kube-apiserver for delegated authentication and authorization; empty:
	// in-cluster.
	Kubeconfig string
	// Healthz, when set, answers GET /healthz in place of the server's own check: KubeVirt's
	// tools read the cluster configuration's version there (clusterconfig.Healthz). /livez and
	// /readyz stay the server's.
	Healthz http.Handler
}

// resources is the group's discovery: the subresources and the verb each is authorized with.
func resources() []metav1.APIResource {
	var out []metav1.APIResource
	for _, sr := range subv1.Table() {
		out = append(out, metav1.APIResource{Name: sr.Resource + "/" + sr.Name, Namespaced: true, Kind: sr.Kind(), Verbs: metav1.Verbs{sr.Verb}})
	}
	return out
}

// NewServer builds the aggregated API server on k8s.io/apiserver: secure serving, authentication
// delegated to the kube-apiserver (its front proxy's request headers, tokens, client certificates)
// and every request authorized by a SubjectAccessReview. It serves the group's discovery and h's
// subresources; console, vnc and portforward are long-running, so neither the request timeout nor
// the in-flight limit cuts them.
func NewServer(o Options, h *Handlers) (*genericapiserver.GenericAPIServer, error) {
	sso := genericoptions.NewSecureServingOptions()
	sso.BindPort = o.BindPort
	sso.ServerCert.CertKey = genericoptions.CertKey{CertFile: o.CertFile, KeyFile: o.KeyFile}
	sso.HTTP2MaxStreamsPerConnection = 1000
	serving := sso.WithLoopback()
	authn := genericoptions.NewDelegatingAuthenticationOptions()
	authn.RemoteKubeConfigFile = o.Kubeconfig
	discoveryPaths := []string{"/apis", "/apis/" + subv1.GroupName}
	for _, v := range Versions {
		discoveryPaths = append(discoveryPaths, "/apis/"+subv1.GroupName+"/"+v)
	}
	authz := genericoptions.NewDelegatingAuthorizationOptions().
		WithAlwaysAllowPaths(append(discoveryPaths, "/healthz", "/readyz", "/livez", launcherv1.KubeletLeasePath)...)
	authz.RemoteKubeConfigFile = o.Kubeconfig
	errs := append(append(serving.Validate(), authn.Validate()...), authz.Validate()...)
	if err := utilerrors.NewAggregate(errs); err != nil {
		return nil, err
	}

	cfg := genericapiserver.NewConfig(codecs)
	if o.Healthz != nil {
		chain := cfg.BuildHandlerChainFunc
		cfg.BuildHandlerChainFunc = func(api http.Handler, c *genericapiserver.Config) http.Handler {
			return withHealthz(chain(api, c), o.Healthz)
		}
	}
	cfg.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	cfg.EnableProfiling = false
	cfg.LongRunningFunc = genericfilters.BasicLongRunningRequestCheck(
		sets.NewString("watch", "proxy"), //nolint:staticcheck // the filter's signature takes sets.String
		sets.NewString(subv1.LongRunningNames()...))
	if err := serving.ApplyToConfig(cfg); err != nil {
		return nil, fmt.Errorf("secure serving: %w", err)
	}
	if err := authn.ApplyTo(&cfg.Authentication, cfg.SecureServing, nil); err != nil {
		return nil, fmt.Errorf("delegated authentication: %w", err)
	}
	if err := authz.ApplyTo(&cfg.Authorization); err != nil {
		return nil, fmt.Errorf("delegated authorization: %w", err)
	}
	cfg.Authorization.Authorizer = union.New(publicVersion, cfg.Authorization.Authorizer)
	s, err := cfg.Complete(nil).New("virt-api", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("build the server: %w", err)
	}
	install(s, h)
	return s, nil
}

// withHealthz answers GET clusterconfig.HealthzPath with healthz, before the server's filters (it
// is public, as the server's own /healthz is), and passes everything else on. The path is cleaned
// first: KubeVirt's tools ask for "//healthz".
func withHealthz(next, healthz http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && path.Clean("/"+r.URL.Path) == clusterconfig.HealthzPath {
			healthz.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// publicVersion lets every authenticated user read the group's version (a resource request to the
// authorizer), as KubeVirt's kubevirt.io:default does; an anonymous caller reaching virt-api's port
// directly is refused as the kube-apiserver refuses it (the RBAC matrix checks both).
var publicVersion = authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.IsResourceRequest() && a.GetAPIGroup() == subv1.GroupName && a.GetResource() == subv1.Version && a.GetName() == "" &&
		a.GetUser() != nil && slices.Contains(a.GetUser().GetGroups(), user.AllAuthenticated) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
})

// install serves discovery (legacy and aggregated) and the subresources on the non-go-restful mux,
// behind the server's authentication and authorization filters.
func install(s *genericapiserver.GenericAPIServer, h *Handlers) {
	group := metav1.APIGroup{Name: subv1.GroupName}
	for _, v := range Versions {
		group.Versions = append(group.Versions, metav1.GroupVersionForDiscovery{GroupVersion: subv1.GroupName + "/" + v, Version: v})
	}
	group.PreferredVersion = group.Versions[0]
	s.DiscoveryGroupManager.AddGroup(group)
	mux := http.NewServeMux()
	for _, v := range Versions {
		gv := schema.GroupVersion{Group: subv1.GroupName, Version: v}
		s.AggregatedDiscoveryGroupManager.AddGroupVersion(subv1.GroupName, apidiscoveryv2.APIVersionDiscovery{
			Version: v, Resources: aggregatedResources(), Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
		})
		s.Handler.NonGoRestfulMux.Handle("/apis/"+gv.String(), discovery.NewAPIVersionHandler(s.Serializer, gv,
			discovery.APIResourceListerFunc(resources)))
		h.Routes(mux, "/apis/"+gv.String())
	}
	s.Handler.NonGoRestfulMux.Handle("/apis/"+subv1.GroupName, discovery.NewAPIGroupHandler(s.Serializer, group))
	s.Handler.NonGoRestfulMux.HandlePrefix("/apis/"+subv1.GroupName+"/", mux)
	// Authorized by its body's token, not the caller's identity (always allowed above).
	s.Handler.NonGoRestfulMux.Handle(launcherv1.KubeletLeasePath, &KubeletLease{Client: h.Client})
}

// aggregatedResources is resources in the aggregated discovery form: each parent resource with its
// subresources (a subresource needs a response kind, or clients drop it).
func aggregatedResources() []apidiscoveryv2.APIResourceDiscovery {
	parents := map[string]*apidiscoveryv2.APIResourceDiscovery{}
	var order []string
	for _, sr := range subv1.Table() {
		kind := &metav1.GroupVersionKind{Kind: sr.Kind()}
		p, ok := parents[sr.Resource]
		if !ok {
			p = &apidiscoveryv2.APIResourceDiscovery{Resource: sr.Resource, Scope: apidiscoveryv2.ScopeNamespace, ResponseKind: kind}
			parents[sr.Resource] = p
			order = append(order, sr.Resource)
		}
		p.Subresources = append(p.Subresources, apidiscoveryv2.APISubresourceDiscovery{
			Subresource: sr.Name, ResponseKind: kind, Verbs: metav1.Verbs{sr.Verb},
		})
	}
	out := make([]apidiscoveryv2.APIResourceDiscovery, 0, len(order))
	for _, n := range order {
		out = append(out, *parents[n])
	}
	return out
}
