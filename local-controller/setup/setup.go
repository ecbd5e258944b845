package setup

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/local-controller/reconcilers/artifactset"
	"github.com/edgefleet/edgefleet/local-controller/reconcilers/edgebootstrap"
	"github.com/edgefleet/edgefleet/local-controller/sitecache"
	"github.com/edgefleet/edgefleet/pkg/election"
	"github.com/edgefleet/edgefleet/pkg/httpserver"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
	"github.com/edgefleet/edgefleet/pkg/meshpolicy"
	"github.com/edgefleet/edgefleet/pkg/recorder"
	"github.com/edgefleet/edgefleet/pkg/restconfig"
	"github.com/edgefleet/edgefleet/pkg/sitelogs"
	"github.com/edgefleet/edgefleet/pkg/version"
)

// Options are the local controller's settings.
type Options struct {
	// Kubeconfig of the site's local cluster; empty means in-cluster.
	Kubeconfig string
	// MetricsAddr serves Prometheus metrics; "0" disables them.
	MetricsAddr string
	// ProbeAddr serves /healthz and /readyz; "0" disables them.
	ProbeAddr string
	// Election is the leader election: on, and its timings.
	Election election.Options
	// Namespace of the local controller: its lease and info ConfigMap.
	Namespace string
	// CacheDir holds the site cache.
	CacheDir string
	// CacheAddr serves the site cache on the site network: HTTPS, plain HTTP on loopback only.
	CacheAddr string
	// CacheURL is the base URL under which Ironic and the BPA reach CacheAddr.
	CacheURL string
	// CacheTLSCertFile and CacheTLSKeyFile are the site cache's serving certificate, read
	// again when they change.
	CacheTLSCertFile, CacheTLSKeyFile string
	// CacheClientCAFile is the CA of the client certificates the site cache accepts: the site
	// API server's client CA. Readers may present a bearer token instead.
	CacheClientCAFile string
	// CacheVerifyInterval is how often every cached artifact is hashed again.
	CacheVerifyInterval time.Duration
	// FetchRetries is how often a broken transfer from the global API is resumed in one attempt.
	FetchRetries int
	// Concurrency is the number of ArtifactSets reconciled in parallel.
	Concurrency int
	// NodeBootstrapper makes provisioned hosts nodes of the application cluster; nil is the
	// site's Binary Provisioning Agent, over SSH, which upgrades Kubernetes in place. Test beds
	// without hosts set a simulator (test/sitesim), in a binary of their own: no flag selects it.
	NodeBootstrapper func(edgebootstrap.ClusterClients) edgebootstrap.Bootstrapper
	// Istio is meshpolicy.ModeAuto, ModeOn or ModeOff: whether the controller keeps its
	// PeerAuthentication and AuthorizationPolicy current (in Namespace).
	Istio string
	// IstioCachePrincipals are the mesh identities that may read the site cache.
	IstioCachePrincipals []string
	// IstioCacheSourceRanges are addresses outside the mesh that may read the site cache.
	IstioCacheSourceRanges []string
	// UninstallMeshPolicies deletes the mesh policies and exits, instead of running.
	UninstallMeshPolicies bool
	// Logs is the ring the process's logger is teed into (main sets it): the local controller
	// answers the global controller's LogRequests in Namespace from it. Nil answers none.
	Logs *sitelogs.Ring
}

// DefaultOptions returns safe production defaults.
func DefaultOptions() Options {
	return Options{
		MetricsAddr:         ":8080",
		ProbeAddr:           ":8081",
		Election:            election.Defaults(),
		Namespace:           sitev1.InfoNamespace,
		CacheDir:            "/var/lib/edgefleet/cache",
		CacheAddr:           ":8180",
		CacheVerifyInterval: 24 * time.Hour,
		FetchRetries:        8,
		Concurrency:         2,
		Istio:               meshpolicy.ModeAuto,
		IstioCachePrincipals: []string{
			meshpolicy.ServiceAccount(sitev1.InfoNamespace, "edgefleet-bpa"),
			meshpolicy.ServiceAccount(sitev1.InfoNamespace, "ironic"),
		},
	}
}

// AddFlags binds the options to command-line flags.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of the site's local cluster (empty: in-cluster config).")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "Address of the Prometheus metrics endpoint (\"0\" disables it).")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr, "Address of the /healthz and /readyz endpoints (\"0\" disables them).")
	o.Election.AddFlags(fs)
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Namespace of the local controller: its lease and info ConfigMap.")
	fs.StringVar(&o.CacheDir, "cache-dir", o.CacheDir, "Directory of the site artifact cache.")
	fs.StringVar(&o.CacheAddr, "cache-bind-address", o.CacheAddr, "Address on which the site cache serves artifacts to Ironic and the BPA: over HTTPS with --cache-tls-cert-file, over plain HTTP only on a loopback address.")
	fs.StringVar(&o.CacheURL, "cache-url", o.CacheURL, "Base URL under which the site network reaches --cache-bind-address, e.g. https://10.0.0.2:8180 (default: https://<bind address>, http:// without TLS, when it names a host).")
	fs.StringVar(&o.CacheTLSCertFile, "cache-tls-cert-file", o.CacheTLSCertFile, "Serving certificate of the site cache (PEM), read again when it changes.")
	fs.StringVar(&o.CacheTLSKeyFile, "cache-tls-key-file", o.CacheTLSKeyFile, "Key of --cache-tls-cert-file (PEM).")
	fs.StringVar(&o.CacheClientCAFile, "cache-client-ca-file", o.CacheClientCAFile, "CA of the client certificates the site cache accepts from its readers, the site API server's client CA (readers may present a bearer token instead).")
	fs.DurationVar(&o.CacheVerifyInterval, "cache-verify-interval", o.CacheVerifyInterval, "How often every cached artifact is hashed again to catch silent corruption.")
	fs.IntVar(&o.FetchRetries, "fetch-retries", o.FetchRetries, "How often a broken transfer from the global artifact API is resumed before the attempt counts as failed.")
	fs.IntVar(&o.Concurrency, "concurrency", o.Concurrency, "ArtifactSets reconciled in parallel.")
	fs.StringVar(&o.Istio, "istio", o.Istio, "Keep the controller's Istio PeerAuthentication (STRICT mTLS) and AuthorizationPolicy current in --namespace: \"auto\" (where Istio's CRDs are installed), \"on\" (fail without them) or \"off\" (docs/security.md).")
	fs.Func("istio-cache-principals", fmt.Sprintf("Comma-separated mesh identities (cluster.local/ns/<namespace>/sa/<service account>) that may read the site cache (default %s: the site's BPA and Ironic).", strings.Join(o.IstioCachePrincipals, ",")), func(v string) error {
		o.IstioCachePrincipals = meshpolicy.SplitList(v)
		return nil
	})
	fs.Func("istio-cache-source-ranges", "Comma-separated addresses (CIDRs or IPs) outside the mesh that may read the site cache, e.g. the provisioning network whose hosts' Ironic agent downloads the OS image (default none).", func(v string) error {
		o.IstioCacheSourceRanges = meshpolicy.SplitList(v)
		return nil
	})
	fs.BoolVar(&o.UninstallMeshPolicies, "uninstall-mesh-policies", o.UninstallMeshPolicies, "Delete the controller's PeerAuthentication and AuthorizationPolicy in --namespace and exit (the uninstall's step; nothing to do where Istio's CRDs are absent).")
}

// Validate names the first bad option, and fills CacheURL from CacheAddr when it can.
func (o *Options) Validate() error {
	if err := o.Election.Validate(); err != nil {
		return err
	}
	if o.CacheURL == "" {
		host, _, err := net.SplitHostPort(o.CacheAddr)
		if err != nil || host == "" || net.ParseIP(host).IsUnspecified() {
			return fmt.Errorf("--cache-url is needed: --cache-bind-address %q does not say how the site network reaches it", o.CacheAddr)
		}
		o.CacheURL = "http://" + o.CacheAddr
		if o.CacheTLSCertFile != "" {
			o.CacheURL = "https://" + o.CacheAddr
		}
	}
	if u, err := url.Parse(o.CacheURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--cache-url %q must be an http:// or https:// URL with a host", o.CacheURL)
	}
	switch {
	case o.Namespace == "":
		return errors.New("--namespace must not be empty")
	case o.CacheDir == "":
		return errors.New("--cache-dir must not be empty")
	case (o.CacheTLSCertFile == "") != (o.CacheTLSKeyFile == ""):
		return errors.New("--cache-tls-cert-file and --cache-tls-key-file go together")
	case o.CacheTLSCertFile == "" && !httpserver.Loopback(o.CacheAddr):
		return fmt.Errorf("--cache-bind-address %s is not a loopback address: give --cache-tls-cert-file and --cache-tls-key-file, the site cache's readers' credentials must not cross a network in clear", o.CacheAddr)
	case o.CacheClientCAFile != "" && o.CacheTLSCertFile == "":
		return errors.New("--cache-client-ca-file needs --cache-tls-cert-file: client certificates come over TLS only")
	case o.CacheVerifyInterval <= 0:
		return fmt.Errorf("--cache-verify-interval must be positive, got %s", o.CacheVerifyInterval)
	case o.FetchRetries < 0:
		return fmt.Errorf("--fetch-retries must not be negative, got %d", o.FetchRetries)
	case o.Concurrency < 1:
		return fmt.Errorf("--concurrency must be at least 1, got %d", o.Concurrency)
	}
	if err := meshpolicy.ValidateMode(o.Istio); err != nil {
		return err
	}
	if _, err := meshComponent(*o); err != nil {
		return err
	}
	return nil
}

// Scheme returns the scheme of the local controller's manager.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, sitev1.AddToScheme, clusterv1.AddToScheme, metal3api.AddToScheme, securityv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	return s, nil
}

// Main runs the local controller of a command line: args are its flags (those of opts and the
// logging flags; -version prints the version), over opts. It blocks until a signal ends it.
func Main(name string, args []string, opts Options) error {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	opts.AddFlags(fs)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	showVersion := fs.Bool("version", false, "Print the version and exit.")
	_ = fs.Parse(args)
	if *showVersion {
		fmt.Println(version.Version)
		return nil
	}
	opts.Logs = sitelogs.NewRing(sitelogs.DefaultRingLines, sitelogs.DefaultRingBytes)
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts), zap.RawZapOpts(opts.Logs.Tee())))
	return Run(ctrl.SetupSignalHandler(), opts)
}

// Run starts the local controller and blocks until ctx is done.
func Run(ctx context.Context, opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	cfg, err := restconfig.Load(opts.Kubeconfig)
	if err != nil {
		return err
	}
	if opts.UninstallMeshPolicies {
		return meshpolicy.Uninstall(ctx, cfg, opts.Namespace, MeshPolicyName, meshPolicyTimeout)
	}
	mgr, stop, err := NewManager(ctx, cfg, opts)
	if err != nil {
		return err
	}
	defer stop()
	ctrl.Log.WithName("setup").Info("starting local controller", "version", version.Version)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

// NewManager builds the local controller's manager on the site cluster of cfg with every
// controller, server and check added. Call the returned function after the manager stopped.
func NewManager(ctx context.Context, cfg *rest.Config, opts Options) (manager.Manager, func(), error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, nil, err
	}
	mopts := ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress: opts.ProbeAddr,
		// LogRequests come to Namespace only, where the controller may read them.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&sitev1.LogRequest{}: {Namespaces: map[string]cache.Config{opts.Namespace: {}}},
		}},
	}
	opts.Election.Apply(&mopts, "edgefleet-local-controller", opts.Namespace)
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		return nil, nil, fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, nil, fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, nil, fmt.Errorf("add ready check: %w", err)
	}
	if err := setupArtifactCache(ctx, mgr, opts); err != nil {
		return nil, nil, err
	}
	mesh, err := meshComponent(opts)
	if err != nil {
		return nil, nil, err
	}
	if err := meshpolicy.Setup(ctx, mgr, opts.Istio, mesh, meshPolicyTimeout); err != nil {
		return nil, nil, err
	}
	stop, err := setupProvisioning(ctx, mgr, opts)
	if err != nil {
		return nil, nil, err
	}
	if err := mgr.Add(&infoPublisher{client: mgr.GetClient(), reader: mgr.GetAPIReader(), namespace: opts.Namespace}); err != nil {
		stop()
		return nil, nil, fmt.Errorf("add info publisher: %w", err)
	}
	if opts.Logs != nil {
		logs := &sitelogs.Responder{Client: mgr.GetClient(), Component: sitev1.LogComponentLocalController, Ring: opts.Logs,
			Instance: sitelogs.Instance(time.Now()), Clock: clock.RealClock{}}
		if err := logs.SetupWithManager(mgr); err != nil {
			stop()
			return nil, nil, fmt.Errorf("set up the LogRequest responder: %w", err)
		}
	}
	return mgr, stop, nil
}

// The LogRequest responder (pkg/sitelogs):
// +kubebuilder:rbac:groups=site.edgefleet.io,namespace=edgefleet-system,resources=logrequests,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=site.edgefleet.io,namespace=edgefleet-system,resources=logrequests/status,verbs=get;update;patch

// The site cache authenticates and authorizes its readers against the site's API server.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// The site cache's URL key (sitecache.EnsureURLKey), in the local controller's namespace.
// +kubebuilder:rbac:groups="",namespace=edgefleet-system,resources=secrets,verbs=get;create

// setupArtifactCache adds the site cache's reconciler, HTTP server and periodic verification.
func setupArtifactCache(ctx context.Context, mgr manager.Manager, opts Options) error {
	log := ctrl.Log.WithName("sitecache")
	sc, err := sitecache.New(opts.CacheDir, log)
	if err != nil {
		return err
	}
	// The manager's client reads from its cache, which starts with the manager: the key is
	// read (or made) once, directly.
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return fmt.Errorf("site cache URL key: %w", err)
	}
	keyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	key, err := sitecache.EnsureURLKey(keyCtx, direct, opts.Namespace)
	if err != nil {
		return err
	}
	urls, err := sitecache.NewURLs(opts.CacheURL, key)
	if err != nil {
		return err
	}
	m, err := artifactset.NewMetrics(metrics.Registry)
	if err != nil {
		return fmt.Errorf("register site cache metrics: %w", err)
	}
	r := &artifactset.Reconciler{
		Client:   mgr.GetClient(),
		Cache:    sc,
		Fetchers: artifactset.GlobalAPIFetchers(mgr.GetAPIReader(), sitev1.HostsNamespace, opts.FetchRetries, time.Second),
		URLs:     urls,
		Recorder: recorder.Bounded(mgr.GetEventRecorder("artifactset-controller")),
		Metrics:  m,
	}
	sc.OnCorrupt = r.CorruptionFound
	if err := r.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: opts.Concurrency}); err != nil {
		return fmt.Errorf("set up ArtifactSet reconciler: %w", err)
	}
	siteCS, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("site cache readers: %w", err)
	}
	readers := kubeauth.NewReviewer(kubeauth.Config{Client: siteCS, Group: sitev1.GroupVersion.Group, Resource: sitecache.ReadersResource})
	srv := &httpserver.Server{Name: "site cache", Addr: opts.CacheAddr, Handler: sc.Handler(readers.Require("get"), urls), Log: log,
		CertFile: opts.CacheTLSCertFile, KeyFile: opts.CacheTLSKeyFile, ClientCAFile: opts.CacheClientCAFile}
	verify := manager.RunnableFunc(func(ctx context.Context) error {
		t := time.NewTicker(opts.CacheVerifyInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
			if n, err := sc.VerifyAll(ctx); err != nil {
				log.Error(err, "verify the site cache")
			} else {
				log.Info("verified the site cache", "corrupted", n)
			}
		}
	})
	if err := mgr.AddReadyzCheck("site-cache", srv.Ready); err != nil {
		return fmt.Errorf("add site cache ready check: %w", err)
	}
	for _, run := range []manager.Runnable{srv, verify} {
		if err := mgr.Add(run); err != nil {
			return fmt.Errorf("add site cache to the manager: %w", err)
		}
	}
	return nil
}

// +kubebuilder:rbac:groups="",namespace=edgefleet-system,resources=configmaps,verbs=get;create;update
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=edgefleet-system,resources=leases,verbs=get;create;update

// infoPublisher writes the local controller's version into the info ConfigMap, which the
// global controller reads into Site.status.localControllerVersion. It reads the ConfigMap
// from the API server, not the manager's cache: a cached read would start a cluster-wide
// ConfigMap informer, which the controller's Role (get in its namespace) does not allow, and
// the read would wait for it for ever.
type infoPublisher struct {
	client    client.Client
	reader    client.Reader
	namespace string
}

// Start publishes once and returns.
func (p *infoPublisher) Start(ctx context.Context) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace, Name: sitev1.InfoConfigMapName}}
	err := p.reader.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	switch {
	case apierrors.IsNotFound(err):
		cm.Data = map[string]string{sitev1.InfoVersionKey: version.Version}
		err = p.client.Create(ctx, cm)
	case err == nil && cm.Data[sitev1.InfoVersionKey] != version.Version:
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[sitev1.InfoVersionKey] = version.Version
		err = p.client.Update(ctx, cm)
	}
	if err != nil {
		return fmt.Errorf("publish version in ConfigMap %s/%s: %w", p.namespace, sitev1.InfoConfigMapName, err)
	}
	return nil
}
