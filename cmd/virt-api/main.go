// Command virt-api serves subresources.kubevirt.io (start, stop, restart on VirtualMachines) as an
// aggregated API server: authentication and authorization delegated to the kube-apiserver, its
// serving certificate generated and rotated by cert-controller, which also injects the CA into the
// APIServices.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"golang.org/x/sync/errgroup"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	agentv1 "github.com/podvirt/podvirt/api/agent/v1"
	heartbeatv1 "github.com/podvirt/podvirt/api/heartbeat/v1"
	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	"github.com/podvirt/podvirt/apiserver"
	"github.com/podvirt/podvirt/apiserver/admission"
	"github.com/podvirt/podvirt/internal/clusterconfig"
	"github.com/podvirt/podvirt/internal/scheme"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "virt-api:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		o                    apiserver.Options
		ns, secret, service  string
		certDir, nodeCertDir string
		webhookPort          int
		policy               admission.Policy
	)
	def := os.Getenv("POD_NAMESPACE")
	if def == "" {
		def = heartbeatv1.Namespace
	}
	flag.IntVar(&o.BindPort, "port", 8443, "HTTPS port")
	flag.StringVar(&ns, "namespace", def, "namespace of virt-api (its Secret and Service)")
	flag.StringVar(&secret, "cert-secret", "virt-api-certs", "Secret that holds the serving certificate and its CA (must exist)")
	flag.StringVar(&service, "service", "virt-api", "Service in front of virt-api: the certificate names service.namespace.svc")
	flag.IntVar(&webhookPort, "webhook-port", 9443, "HTTPS port of the admission webhooks")
	flag.StringVar(&nodeCertDir, "node-cert-dir", "/var/run/podvirt-api/node-certs", "writable directory for the node agents' CA and virt-api's client certificate")
	flag.StringVar(&certDir, "cert-dir", "/var/run/podvirt-api/certs", "writable directory for the serving certificate files")
	var gates, maxDisk, callers string
	flag.StringVar(&callers, "webhook-client-names", "", "comma-separated common names of the client certificates (of the cluster's client CA) the webhook port accepts: the kube-apiserver's, set with its --admission-control-config-file; empty accepts any caller, as KubeVirt does")
	flag.StringVar(&gates, "feature-gates", "", "comma-separated feature gates to enable (known: "+strings.Join(admission.Features, ", ")+"; KubeVirt's names); the KubeVirt object's featureGates add to them and its disabledFeatureGates remove them")
	flag.BoolVar(&policy.CrossNamespaceNetworks, "allow-cross-namespace-networks", false, "admit Multus networks named NAMESPACE/NAME in another namespace than the instance's")
	flag.BoolVar(&policy.ExternalEviction, "allow-external-eviction", false, "admit evictionStrategy External: the eviction of such a launcher Pod is refused until the administrator's own controller moves or stops the guest (drains wait with no bound)")
	flag.StringVar(&maxDisk, "max-disk-capacity", admission.DefaultMaxDiskCapacity.String(), "largest emptyDisk or created hostDisk an instance may ask for")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	if f := flag.Lookup("kubeconfig"); f != nil { // controller-runtime's flag: the same cluster for both
		o.Kubeconfig = f.Value.String()
	}
	if err := policy.EnableFeatures(gates); err != nil {
		return fmt.Errorf("--feature-gates: %w", err)
	}
	maxCap, err := resource.ParseQuantity(maxDisk)
	if err != nil || maxCap.Sign() <= 0 {
		return fmt.Errorf("--max-disk-capacity: %q is not a positive quantity", maxDisk)
	}
	policy.MaxDiskCapacity = maxCap
	o.CertFile, o.KeyFile = filepath.Join(certDir, corev1.TLSCertKey), filepath.Join(certDir, corev1.TLSPrivateKeyKey)
	for flagName, dir := range map[string]string{"--cert-dir": certDir, "--node-cert-dir": nodeCertDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("%s: %w", flagName, err)
		}
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kube-apiserver config: %w", err)
	}
	kvObj, kvCache := clusterconfig.CacheByObject(ns) // the cluster configuration: only Podvirt's namespace
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme.New(),
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{ns: {}}},
			&certificatesv1.CertificateSigningRequest{}: apiserver.SignerCache(),
			kvObj: kvCache,
		}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	direct, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	ready, err := setupServingCerts(mgr, types.NamespacedName{Namespace: ns, Name: secret}, service, certDir)
	if err != nil {
		return err
	}
	agents, err := setupNodeCerts(mgr, direct, ns, nodeCertDir, types.NamespacedName{Namespace: ns, Name: secret})
	if err != nil {
		return err
	}
	hooks, clientCAs, err := webhookServer(cfg, webhookPort, certDir, callers)
	if err != nil {
		return err
	}
	if err := clusterconfig.Watch(context.Background(), mgr.GetCache()); err != nil {
		return err
	}
	admission.Register(hooks, mgr.GetScheme(), direct, ns, admission.FromCluster(policy, mgr.GetClient(), ns))
	o.Healthz = clusterconfig.Healthz(&clusterconfig.Source{Reader: mgr.GetClient(), Namespace: ns, Base: clusterconfig.Defaults()})

	ctx := ctrl.SetupSignalHandler()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return mgr.Start(ctx) })
	// The API server and the admission webhooks serve with the same certificate (it names the
	// Service), once it exists.
	g.Go(afterReady(ctx, ready, func() error {
		h := &apiserver.Handlers{Client: direct, Agents: agents, Stopping: ctx.Done()}
		s, err := apiserver.NewServer(o, h)
		if err != nil {
			return err
		}
		err = s.PrepareRun().RunWithContext(ctx)
		h.Wait() // open streams tell their clients virt-api is going away
		return err
	}))
	if clientCAs != nil {
		g.Go(func() error { clientCAs.Run(ctx, 1); return nil })
	}
	g.Go(afterReady(ctx, ready, func() error { return hooks.Start(ctx) }))
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// webhookServer is the admission webhooks' HTTPS server. With caller names, it accepts only client
// certificates of the cluster's client CA with those names (the returned controller, to be run,
// follows that CA); otherwise anyone.
func webhookServer(cfg *rest.Config, port int, certDir, callers string) (webhook.Server, *dynamiccertificates.ConfigMapCAController, error) {
	opts := webhook.Options{Port: port, CertDir: certDir}
	if callers == "" {
		ctrl.Log.Info("The webhook port answers any caller: set --webhook-client-names (and the kube-apiserver's client certificate for webhooks) to accept only the kube-apiserver")
		return webhook.NewServer(opts), nil, nil
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("create clientset: %w", err)
	}
	cas, err := dynamiccertificates.NewDynamicCAFromConfigMapController("webhook-client-ca", metav1.NamespaceSystem,
		"extension-apiserver-authentication", "client-ca-file", kube)
	if err != nil {
		return nil, nil, fmt.Errorf("--webhook-client-names: the cluster's client CA: %w", err)
	}
	var names []string
	for _, n := range strings.Split(callers, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	opts.TLSOpts = []func(*tls.Config){admission.RequireCallers(cas, names)}
	return webhook.NewServer(opts), cas, nil
}

// afterReady runs start once ready is closed (nothing if ctx ends first).
func afterReady(ctx context.Context, ready <-chan struct{}, start func() error) func() error {
	return func() error {
		select {
		case <-ready:
			return start()
		case <-ctx.Done():
			return nil
		}
	}
}

// setupServingCerts has cert-controller keep virt-api's serving certificate (for the Service's
// name) in secret and inject its CA into the APIServices and the webhook configurations; CertFiles
// writes it into dir. The returned channel closes once the certificate is in place.
func setupServingCerts(mgr ctrl.Manager, secret types.NamespacedName, service, dir string) (<-chan struct{}, error) {
	var targets []rotator.WebhookInfo
	for _, v := range apiserver.Versions {
		targets = append(targets, rotator.WebhookInfo{Name: v + "." + subv1.GroupName, Type: rotator.APIService})
	}
	targets = append(targets,
		rotator.WebhookInfo{Name: admission.ValidatingConfiguration, Type: rotator.Validating},
		rotator.WebhookInfo{Name: admission.MutatingConfiguration, Type: rotator.Mutating})
	ready := make(chan struct{})
	if err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey: secret, CertDir: dir, CAName: "podvirt-virt-api-ca", CAOrganization: "podvirt",
		DNSName:       service + "." + secret.Namespace + ".svc",
		ExtraDNSNames: []string{service + "." + secret.Namespace + ".svc.cluster.local"},
		IsReady:       ready, Webhooks: targets,
	}); err != nil {
		return nil, fmt.Errorf("certificate rotation: %w", err)
	}
	if err := (&apiserver.CertFiles{Client: mgr.GetClient(), Secret: secret, Dir: dir}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("certificate files: %w", err)
	}
	return ready, nil
}

// setupNodeCerts runs the node agents' CA: a second rotator keeps the CA and virt-api's client
// certificate (agentv1.VirtAPIIdentity) in virt-handler-ca; CertFiles gives virt-api its files,
// NodeCerts copies the CA's certificate (no key) into virt-handler-certs, the only Secret the agents
// may read, and NodeSigner signs each agent's own certificate.
func setupNodeCerts(mgr ctrl.Manager, c client.Client, ns, dir string, serving types.NamespacedName) (*apiserver.Agents, error) {
	from := types.NamespacedName{Namespace: ns, Name: "virt-handler-ca"}
	if err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey: from, CertDir: dir, CAName: "podvirt-node-ca", CAOrganization: "podvirt", DNSName: agentv1.VirtAPIIdentity(ns),
		ExtKeyUsages:   &[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		IsReady:        make(chan struct{}),
		ControllerName: "node-cert-rotator",
	}); err != nil {
		return nil, fmt.Errorf("node certificate rotation: %w", err)
	}
	if err := (&apiserver.CertFiles{Client: mgr.GetClient(), Secret: from, Dir: dir}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("node certificate files: %w", err)
	}
	to := types.NamespacedName{Namespace: ns, Name: agentv1.CertSecret}
	if err := (&apiserver.NodeCerts{Client: mgr.GetClient(), From: from, To: to, Serving: serving}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("node agents' certificates: %w", err)
	}
	if err := (&apiserver.NodeSigner{Client: mgr.GetClient(), CA: from, Requester: apiserver.RequesterOf(ns)}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("node agents' certificate signer: %w", err)
	}
	return &apiserver.Agents{Client: c, CertDir: dir, Port: agentv1.DefaultPort}, nil
}
