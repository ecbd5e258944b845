package siteclient

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// Probe is what a site said about itself.
type Probe struct {
	// KubernetesVersion is the git version the site's API server reports.
	KubernetesVersion string
	// LocalControllerVersion is the version the local controller publishes; empty when none is
	// installed.
	LocalControllerVersion string
}

// Cache keeps one client per site, keyed by the Site's namespaced name and rebuilt when the
// fingerprint of its kubeconfig (the Secret's UID and resourceVersion) changes. It is safe for
// concurrent use.
type Cache struct {
	// Timeout bounds every request to a site.
	Timeout time.Duration
	// UserAgent is sent to the sites.
	UserAgent string
	// Addresses says which addresses of a site's API server its client connects to, checked
	// at every connection (AddressPolicy.Guard).
	Addresses AddressPolicy

	scheme *runtime.Scheme
	mapper meta.RESTMapper

	mu      sync.Mutex
	entries map[types.NamespacedName]entry
}

type entry struct {
	fingerprint string
	client      kubernetes.Interface
	objects     client.Client
}

// NewCache returns an empty cache whose requests time out after timeout and whose clients
// connect only to the addresses the policy allows.
func NewCache(timeout time.Duration, userAgent string, addresses AddressPolicy) *Cache {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(fmt.Sprintf("siteclient: add client-go scheme: %v", err))
	}
	if err := sitev1.AddToScheme(scheme); err != nil {
		panic(fmt.Sprintf("siteclient: add site scheme: %v", err))
	}
	return &Cache{
		Timeout: timeout, UserAgent: userAgent, Addresses: addresses, entries: map[types.NamespacedName]entry{},
		scheme: scheme, mapper: pushMapper(),
	}
}

// pushMapper maps the kinds the global controller writes to a site. It is static, so a site
// client never runs discovery: fewer requests, and nothing to grant for it.
func pushMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(corev1.SchemeGroupVersion.WithKind("Secret"), meta.RESTScopeNamespace)
	m.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	m.Add(sitev1.GroupVersion.WithKind("ApplicationCluster"), meta.RESTScopeNamespace)
	m.Add(sitev1.GroupVersion.WithKind("ArtifactSet"), meta.RESTScopeNamespace)
	m.Add(sitev1.GroupVersion.WithKind("ClusterCredentialRequest"), meta.RESTScopeNamespace)
	m.Add(sitev1.GroupVersion.WithKind("LogRequest"), meta.RESTScopeNamespace)
	return m
}

// Connect makes sure the site has a client built from the kubeconfig with this fingerprint.
// Only when the fingerprint changed does it call read for the kubeconfig, check it with Load and
// build a new client; it reports whether it did. On error the site's old client is dropped.
func (c *Cache) Connect(ctx context.Context, site types.NamespacedName, fingerprint string, read func(context.Context) ([]byte, error)) (bool, error) {
	c.mu.Lock()
	e, ok := c.entries[site]
	c.mu.Unlock()
	if ok && e.fingerprint == fingerprint {
		return false, nil
	}
	c.Forget(site)
	kubeconfig, err := read(ctx)
	if err != nil {
		return false, err
	}
	cfg, err := Load(kubeconfig)
	if err != nil {
		return false, err
	}
	if cfg, err = c.Addresses.Guard(cfg); err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	cfg.Timeout = c.Timeout
	cfg.UserAgent = c.UserAgent
	cfg.QPS, cfg.Burst = 5, 10
	// One HTTP client (one connection pool, one rate limiter) per site, shared by both clients.
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	cs, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	objects, err := client.New(cfg, client.Options{HTTPClient: httpClient, Scheme: c.scheme, Mapper: c.mapper})
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	c.mu.Lock()
	c.entries[site] = entry{fingerprint: fingerprint, client: cs, objects: objects}
	c.mu.Unlock()
	return true, nil
}

// Client returns the site's client for the objects the global controller pushes to it
// (ApplicationCluster, Secrets, ConfigMaps; no discovery, no cache). Every request times out
// after Timeout. It fails when the site has no client (Connect first).
func (c *Cache) Client(site types.NamespacedName) (client.Client, error) {
	c.mu.Lock()
	e, ok := c.entries[site]
	c.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("site %s has no client: its kubeconfig was not loaded", site)
	}
	return e.objects, nil
}

// Forget drops the site's client.
func (c *Cache) Forget(site types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, site)
}

// Probe asks the site's API server for its version and reads the local controller's info
// ConfigMap. It fails when the site has no client (Connect first) or its API server does not
// answer.
func (c *Cache) Probe(ctx context.Context, site types.NamespacedName) (Probe, error) {
	c.mu.Lock()
	e, ok := c.entries[site]
	c.mu.Unlock()
	if !ok {
		return Probe{}, fmt.Errorf("site %s has no client: its kubeconfig was not loaded", site)
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()

	raw, err := e.client.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(ctx)
	if err != nil {
		return Probe{}, fmt.Errorf("GET /version: %w", err)
	}
	var info version.Info
	if err := json.Unmarshal(raw, &info); err != nil {
		return Probe{}, fmt.Errorf("GET /version answered something that is not a Kubernetes version: %w", err)
	}
	p := Probe{KubernetesVersion: info.GitVersion}

	cm, err := e.client.CoreV1().ConfigMaps(sitev1.InfoNamespace).Get(ctx, sitev1.InfoConfigMapName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		// No local controller installed yet, or the kubeconfig may not read its info.
	case err != nil:
		return Probe{}, fmt.Errorf("read ConfigMap %s/%s: %w", sitev1.InfoNamespace, sitev1.InfoConfigMapName, err)
	default:
		p.LocalControllerVersion = cm.Data[sitev1.InfoVersionKey]
	}
	return p, nil
}
