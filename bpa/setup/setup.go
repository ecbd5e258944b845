package setup

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
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
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/bpa/charts"
	"github.com/edgefleet/edgefleet/bpa/clusterkms"
	"github.com/edgefleet/edgefleet/bpa/install"
	"github.com/edgefleet/edgefleet/bpa/reconcilers/applicationcluster"
	"github.com/edgefleet/edgefleet/bpa/reconcilers/clustercredential"
	"github.com/edgefleet/edgefleet/bpa/reconcilers/kmsaccount"
	"github.com/edgefleet/edgefleet/pkg/certs"
	"github.com/edgefleet/edgefleet/pkg/clustercred"
	"github.com/edgefleet/edgefleet/pkg/election"
	"github.com/edgefleet/edgefleet/pkg/recorder"
	"github.com/edgefleet/edgefleet/pkg/restconfig"
	"github.com/edgefleet/edgefleet/pkg/secrets"
	"github.com/edgefleet/edgefleet/pkg/sitelogs"
	"github.com/edgefleet/edgefleet/pkg/sshexec"
	"github.com/edgefleet/edgefleet/pkg/vaultauth"
	"github.com/edgefleet/edgefleet/pkg/version"
)

// SSHKeySecret is the secret holding the BPA's SSH private key (key private-key, PEM).
const SSHKeySecret = "bpa-ssh-key"

// HostKeyPrefix starts the names of the secrets pinning host keys (one per machine).
const HostKeyPrefix = "hostkey-"

// Options are the BPA's settings.
type Options struct {
	// Kubeconfig of the site's local cluster; empty means in-cluster. Its credentials also
	// authenticate the BPA to the site cache.
	Kubeconfig string
	// SiteCacheCAFile holds the CAs the site cache's serving certificate is checked against;
	// empty: the kubeconfig's (on a bootstrap machine one site CA signs both).
	SiteCacheCAFile string
	// MetricsAddr serves Prometheus metrics; "0" disables them.
	MetricsAddr string
	// ProbeAddr serves /healthz and /readyz; "0" disables them.
	ProbeAddr string
	// Election is the leader election: on, and its timings.
	Election election.Options
	// Namespace of the BPA: its lease, its ConfigMap, the ApplicationClusters it serves and,
	// without Vault, its secrets.
	Namespace string
	// Vault is the Vault server and how the BPA logs in to it (pkg/vaultauth); an empty
	// Vault.Addr keeps secrets in Kubernetes Secrets.
	Vault vaultauth.Options
	// VaultMount is the KV v2 mount and VaultPrefix the path under it.
	VaultMount, VaultPrefix string
	// SSHParallelism is how many hosts are worked on at once.
	SSHParallelism int
	// SSHTimeout bounds a step on a host that has no timeout of its own.
	SSHTimeout time.Duration
	// Retry is how long to wait before looking again at a cluster that waits or failed.
	Retry time.Duration
	// Resync is how often an installed cluster is checked again.
	Resync time.Duration
	// MaxCredentialTTL is the longest a cluster user's client certificate lives.
	MaxCredentialTTL time.Duration
	// Certificates is the lifetime of the application clusters' leaf certificates.
	Certificates certs.Lifetime
	// Logs is the ring the process's logger is teed into (main sets it): the BPA answers the
	// global controller's LogRequests from it. Nil answers none.
	Logs *sitelogs.Ring
	// ClusterKMS is where the application clusters' KMS plugins reach Vault; an empty
	// ClusterKMS.VaultAddr encrypts their Secrets with a secretbox key of each cluster's PKI.
	ClusterKMS clusterkms.Options
	// ClusterKMSCAFile holds ClusterKMS.VaultCA.
	ClusterKMSCAFile string
}

// DefaultOptions returns safe production defaults.
func DefaultOptions() Options {
	vault := vaultauth.DefaultOptions()
	vault.Addr = os.Getenv("VAULT_ADDR")
	return Options{
		MetricsAddr:    ":8080",
		ProbeAddr:      ":8081",
		Election:       election.Defaults(),
		Namespace:      sitev1.InfoNamespace,
		Vault:          vault,
		VaultMount:     "secret",
		VaultPrefix:    "edgefleet/bpa",
		SSHParallelism: 10,
		SSHTimeout:     5 * time.Minute,
		Retry:          15 * time.Second,
		Resync:         10 * time.Minute,

		MaxCredentialTTL: clustercred.DefaultMaxTTL,
		Certificates:     certs.Lifetime{Validity: certs.LeafValidity, RenewBefore: certs.RenewBefore},
		ClusterKMS: clusterkms.Options{AuthMount: "kubernetes", Role: "edgefleet-kms", TransitMount: "transit",
			KeyPrefix: "edgefleet-kms-", TokenTTL: time.Hour},
	}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of the site's local cluster (empty: in-cluster config).")
	fs.StringVar(&o.SiteCacheCAFile, "site-cache-ca-file", o.SiteCacheCAFile, "CA file the site cache's serving certificate is checked against (default: the kubeconfig's CA). The BPA reads the site cache with the kubeconfig's credentials.")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "Address of the Prometheus metrics endpoint (\"0\" disables it).")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr, "Address of the /healthz and /readyz endpoints (\"0\" disables them).")
	o.Election.AddFlags(fs)
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Namespace of the BPA: its lease, the ConfigMap "+sitev1.BPAConfigMapName+", the ApplicationClusters it builds and, without Vault, its secrets.")
	fs.StringVar(&o.Vault.Addr, "vault-addr", o.Vault.Addr, "Vault server keeping the SSH key, host keys, cluster PKI and kubeconfigs (default $VAULT_ADDR; empty: Kubernetes Secrets in --namespace). The BPA logs in as --vault-auth says.")
	fs.DurationVar(&o.Vault.Timeout, "vault-timeout", o.Vault.Timeout, "Bound of each Vault call (logins and renewals included).")
	o.Vault.AddFlags(fs)
	fs.StringVar(&o.VaultMount, "vault-mount", o.VaultMount, "Mount of Vault's KV version 2 engine.")
	fs.StringVar(&o.VaultPrefix, "vault-prefix", o.VaultPrefix, "Path under --vault-mount for the BPA's secrets.")
	fs.IntVar(&o.SSHParallelism, "ssh-parallelism", o.SSHParallelism, "Hosts worked on at once.")
	fs.DurationVar(&o.SSHTimeout, "ssh-timeout", o.SSHTimeout, "Bound of a step on a host that has none of its own.")
	fs.DurationVar(&o.Retry, "retry-interval", o.Retry, "Wait before looking again at a cluster that waits for hosts or met an error.")
	fs.DurationVar(&o.Resync, "resync-interval", o.Resync, "How often an installed cluster is checked again.")
	fs.DurationVar(&o.Certificates.Validity, "certificate-validity", o.Certificates.Validity, "Lifetime of the application clusters' leaf certificates (etcd, API server, components, nodes; the CAs live ten years).")
	fs.DurationVar(&o.Certificates.RenewBefore, "certificate-renew-before", o.Certificates.RenewBefore, "A leaf certificate with less than this left is issued again, and reaches its services at the next pass over the cluster (--resync-interval), one host at a time. Shorter than --certificate-validity.")
	fs.DurationVar(&o.MaxCredentialTTL, "max-credential-ttl", o.MaxCredentialTTL, "Longest lifetime of a cluster user's client certificate; longer requests get this.")
	fs.StringVar(&o.ClusterKMS.VaultAddr, "cluster-kms-vault-addr", o.ClusterKMS.VaultAddr, "Vault's https URL as the application clusters' control-plane hosts reach it: their API servers then encrypt Secrets through the KMS plugin (the kms-plugin package) with a transit key per cluster. Needs --vault-addr (the BPA makes the keys). Empty: a secretbox key per cluster, kept in the BPA's secret store. A cluster keeps the one it was built with.")
	fs.StringVar(&o.ClusterKMSCAFile, "cluster-kms-vault-ca-file", o.ClusterKMSCAFile, "PEM file of the CAs of Vault's certificate, written to the control-plane hosts for the KMS plugin.")
	fs.StringVar(&o.ClusterKMS.AuthMount, "cluster-kms-auth-mount", o.ClusterKMS.AuthMount, "Mount of the Vault Kubernetes auth method that reviews this site cluster's ServiceAccount tokens (the plugins log in there).")
	fs.StringVar(&o.ClusterKMS.Role, "cluster-kms-role", o.ClusterKMS.Role, "Vault role of the KMS plugins, bound to the ServiceAccounts edgefleet-kms-* of namespace "+clusterkms.Namespace+" (docs/security.md).")
	fs.StringVar(&o.ClusterKMS.TransitMount, "cluster-kms-transit-mount", o.ClusterKMS.TransitMount, "Mount of Vault's transit engine.")
	fs.StringVar(&o.ClusterKMS.KeyPrefix, "cluster-kms-key-prefix", o.ClusterKMS.KeyPrefix, "Each cluster's transit key is this prefix and the cluster's name; make it unique to the site when sites share a Vault.")
	fs.DurationVar(&o.ClusterKMS.TokenTTL, "cluster-kms-token-ttl", o.ClusterKMS.TokenTTL, "Lifetime of the KMS plugins' ServiceAccount tokens; a new one is written to the hosts once half of it is gone.")
}

// Validate names the first bad option.
func (o *Options) Validate() error {
	if err := o.Election.Validate(); err != nil {
		return err
	}
	switch {
	case o.Namespace == "":
		return errors.New("--namespace must not be empty")
	case o.Vault.Addr != "" && o.VaultMount == "":
		return errors.New("--vault-mount must not be empty with --vault-addr")
	case o.SSHParallelism < 1:
		return fmt.Errorf("--ssh-parallelism must be at least 1, got %d", o.SSHParallelism)
	case o.SSHTimeout <= 0:
		return fmt.Errorf("--ssh-timeout must be positive, got %s", o.SSHTimeout)
	case o.Retry <= 0:
		return fmt.Errorf("--retry-interval must be positive, got %s", o.Retry)
	case o.Resync <= 0:
		return fmt.Errorf("--resync-interval must be positive, got %s", o.Resync)
	case o.MaxCredentialTTL <= 0:
		return fmt.Errorf("--max-credential-ttl must be positive, got %s", o.MaxCredentialTTL)
	case o.Certificates.Validity < time.Minute:
		return fmt.Errorf("--certificate-validity must be at least 1m, got %s", o.Certificates.Validity)
	case o.Certificates.RenewBefore <= 0 || o.Certificates.RenewBefore >= o.Certificates.Validity:
		return fmt.Errorf("--certificate-renew-before must be positive and shorter than --certificate-validity (%s), got %s", o.Certificates.Validity, o.Certificates.RenewBefore)
	case o.Certificates.RenewBefore <= o.Resync:
		return fmt.Errorf("--certificate-renew-before (%s) must be longer than --resync-interval (%s): a certificate could expire before the pass that renews it", o.Certificates.RenewBefore, o.Resync)
	case o.ClusterKMS.VaultAddr != "" && o.Vault.Addr == "":
		return errors.New("--cluster-kms-vault-addr needs --vault-addr: the BPA makes each cluster's transit key in Vault")
	case o.ClusterKMS.VaultAddr != "" && o.ClusterKMSCAFile == "":
		return errors.New("--cluster-kms-vault-ca-file is required with --cluster-kms-vault-addr")
	case o.Vault.Addr != "":
		return o.Vault.Validate()
	}
	return nil
}

// Scheme returns the scheme of the BPA's manager.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, sitev1.AddToScheme, clusterv1.AddToScheme, metal3api.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	return s, nil
}

// Run starts the BPA and blocks until ctx is done.
func Run(ctx context.Context, opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	cfg, err := restconfig.Load(opts.Kubeconfig)
	if err != nil {
		return err
	}
	mgr, err := NewManager(ctx, cfg, opts)
	if err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("starting BPA", "version", version.Version)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

// NewManager builds the BPA's manager on the site cluster of cfg.
func NewManager(ctx context.Context, cfg *rest.Config, opts Options) (manager.Manager, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	mopts := ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress: opts.ProbeAddr,
		// The BPA serves the ApplicationClusters of its own namespace only; the ServiceAccounts
		// it reads are the KMS plugins', in their namespace (bpa/reconcilers/kmsaccount).
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{opts.Namespace: {}},
			ByObject: map[client.Object]cache.ByObject{&corev1.ServiceAccount{}: {Namespaces: map[string]cache.Config{clusterkms.Namespace: {}}}}},
	}
	opts.Election.Apply(&mopts, "edgefleet-bpa", opts.Namespace)
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	for name, add := range map[string]func(string, healthz.Checker) error{"health": mgr.AddHealthzCheck, "ready": mgr.AddReadyzCheck} {
		if err := add("ping", healthz.Ping); err != nil {
			return nil, fmt.Errorf("add %s check: %w", name, err)
		}
	}
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("site client: %w", err)
	}
	store, vault, err := secretStore(ctx, opts, direct)
	if err != nil {
		return nil, err
	}
	kms, err := clusterKMS(opts, cfg, vault)
	if err != nil {
		return nil, err
	}
	signer, err := ensureSSHKey(ctx, store)
	if err != nil {
		return nil, err
	}
	if err := publish(ctx, direct, opts.Namespace, signer); err != nil {
		return nil, err
	}
	exec := sshexec.New(signer, &sshexec.StoredHostKeys{Store: store, Prefix: HostKeyPrefix},
		sshexec.Options{DefaultTimeout: opts.SSHTimeout, Parallelism: opts.SSHParallelism})
	// The executor keeps SSH connections to the hosts between steps: close them when the
	// manager stops.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		exec.Close()
		return nil
	})); err != nil {
		return nil, fmt.Errorf("add the SSH executor's closer: %w", err)
	}
	// The site cache: the BPA's site identity reads it (artifacts.site.edgefleet.io get).
	cacheHTTP, err := restconfig.HTTPClient(cfg, opts.SiteCacheCAFile, 30*time.Minute)
	if err != nil {
		return nil, fmt.Errorf("site cache client: %w", err)
	}
	r := &applicationcluster.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Installer: install.New(exec),
		Secrets:   store,
		Charts: func(cfg *rest.Config) (applicationcluster.ChartInstaller, error) {
			return charts.New(cfg, charts.Options{Log: ctrl.Log.WithName("helm")})
		},
		ClusterClient: func(cfg *rest.Config) (kubernetes.Interface, error) { return kubernetes.NewForConfig(cfg) },
		HTTP:          cacheHTTP,
		Recorder:      recorder.Bounded(mgr.GetEventRecorder("bpa")),
		Retry:         opts.Retry,
		Resync:        opts.Resync,
		Certificates:  opts.Certificates,
		// The old CAs of a roll-over stay trusted until the cluster users' certificates
		// they signed (creds, below) have expired.
		ClientCertificateMaxTTL: opts.MaxCredentialTTL,
	}
	if kms != nil {
		r.KMS = kms
		accounts := &kmsaccount.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Tokens: kms}
		if err := accounts.SetupWithManager(mgr, controller.Options{}); err != nil {
			return nil, fmt.Errorf("set up the KMS plugin ServiceAccount reconciler: %w", err)
		}
	}
	if err := r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return nil, fmt.Errorf("set up the ApplicationCluster reconciler: %w", err)
	}
	creds := &clustercredential.Reconciler{
		Client:   mgr.GetClient(),
		Secrets:  store,
		Recorder: recorder.Bounded(mgr.GetEventRecorder("bpa")),
		Clock:    clock.RealClock{},
		MaxTTL:   opts.MaxCredentialTTL,
	}
	if err := creds.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return nil, fmt.Errorf("set up the ClusterCredentialRequest reconciler: %w", err)
	}
	if opts.Logs != nil {
		logs := &sitelogs.Responder{Client: mgr.GetClient(), Component: sitev1.LogComponentBPA, Ring: opts.Logs,
			Instance: sitelogs.Instance(time.Now()), Clock: clock.RealClock{}}
		if err := logs.SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("set up the LogRequest responder: %w", err)
		}
	}
	return mgr, nil
}

// The LogRequest responder (pkg/sitelogs), in the BPA's namespace:
// +kubebuilder:rbac:groups=site.edgefleet.io,resources=logrequests,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=site.edgefleet.io,resources=logrequests/status,verbs=get;update;patch

// secretStore is Vault when an address is set (its client returned too), else Kubernetes
// Secrets in the namespace. The Vault token is kept alive until ctx ends.
func secretStore(ctx context.Context, opts Options, direct client.Client) (secrets.Store, *vaultapi.Client, error) {
	if opts.Vault.Addr == "" {
		return secrets.NewKubernetes(direct, opts.Namespace), nil, nil
	}
	vault, err := vaultauth.Connect(ctx, opts.Vault, ctrl.Log.WithName("vault"))
	if err != nil {
		return nil, nil, err
	}
	return secrets.NewVault(vault.Client, opts.VaultMount, opts.VaultPrefix), vault.Client, nil
}

// clusterKMS is the clusters' KMS source when --cluster-kms-vault-addr is set, else nil.
func clusterKMS(opts Options, cfg *rest.Config, vault *vaultapi.Client) (*clusterkms.Source, error) {
	if opts.ClusterKMS.VaultAddr == "" {
		return nil, nil
	}
	ca, err := os.ReadFile(opts.ClusterKMSCAFile)
	if err != nil {
		return nil, fmt.Errorf("--cluster-kms-vault-ca-file: %w", err)
	}
	o := opts.ClusterKMS
	o.VaultCA = ca
	if err := o.Validate(); err != nil {
		return nil, err
	}
	// Each ServiceAccount create and TokenRequest is bounded: a reconcile waits on them.
	bounded := rest.CopyConfig(cfg)
	bounded.Timeout = 30 * time.Second
	kube, err := kubernetes.NewForConfig(bounded)
	if err != nil {
		return nil, fmt.Errorf("site clientset: %w", err)
	}
	return clusterkms.New(o, vault.Logical(), kube, clusterkms.Namespace, time.Now), nil
}

// ensureSSHKey reads the BPA's SSH key from the store, making one the first time.
func ensureSSHKey(ctx context.Context, store secrets.Store) (ssh.Signer, error) {
	data, err := store.Get(ctx, SSHKeySecret)
	if errors.Is(err, secrets.ErrNotFound) {
		if err := newSSHKey(ctx, store); err != nil {
			return nil, err
		}
		data, err = store.Get(ctx, SSHKeySecret) // what is stored wins, should another replica have raced
	}
	if err != nil {
		return nil, fmt.Errorf("the BPA's SSH key: %w", err)
	}
	return sshexec.ParseSigner(data["private-key"])
}

// newSSHKey makes an ed25519 key and puts it into the store.
func newSSHKey(ctx context.Context, store secrets.Store) error {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	block, err := ssh.MarshalPrivateKey(key, "edgefleet-bpa")
	if err != nil {
		return err
	}
	if err := store.Put(ctx, SSHKeySecret, map[string][]byte{"private-key": pem.EncodeToMemory(block)}); err != nil {
		return fmt.Errorf("store the BPA's new SSH key: %w", err)
	}
	return nil
}

// publish writes the BPA's public key and version into its ConfigMap.
func publish(ctx context.Context, c client.Client, namespace string, signer ssh.Signer) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: sitev1.BPAConfigMapName}}
	if _, err := controllerutil.CreateOrPatch(ctx, c, cm, func() error {
		cm.Data = map[string]string{
			sitev1.BPAAuthorizedKeyKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))) + " edgefleet-bpa",
			sitev1.BPAVersionKey:       version.Version,
		}
		return nil
	}); err != nil {
		return fmt.Errorf("publish the BPA's public key in ConfigMap %s/%s: %w", namespace, sitev1.BPAConfigMapName, err)
	}
	return nil
}
