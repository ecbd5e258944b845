package setup

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	securityv1 "istio.io/client-go/pkg/apis/security/v1"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/global-controller/artifactapi"
	"github.com/edgefleet/edgefleet/global-controller/index"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/campaign"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/host"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/release"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/site"
	"github.com/edgefleet/edgefleet/global-controller/sitelogapi"
	"github.com/edgefleet/edgefleet/global-controller/webhooks"
	"github.com/edgefleet/edgefleet/pkg/artifacts"
	"github.com/edgefleet/edgefleet/pkg/clustercred"
	"github.com/edgefleet/edgefleet/pkg/election"
	"github.com/edgefleet/edgefleet/pkg/httpserver"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
	"github.com/edgefleet/edgefleet/pkg/meshpolicy"
	"github.com/edgefleet/edgefleet/pkg/packages"
	"github.com/edgefleet/edgefleet/pkg/recorder"
	"github.com/edgefleet/edgefleet/pkg/restconfig"
	"github.com/edgefleet/edgefleet/pkg/siteclient"
	"github.com/edgefleet/edgefleet/pkg/vaultauth"
	"github.com/edgefleet/edgefleet/pkg/vaultref"
	"github.com/edgefleet/edgefleet/pkg/version"
)

// Options are the global controller's settings.
type Options struct {
	// Kubeconfig of the global cluster; empty means in-cluster.
	Kubeconfig string
	// MetricsAddr serves Prometheus metrics; "0" disables them.
	MetricsAddr string
	// ProbeAddr serves /healthz and /readyz; "0" disables them.
	ProbeAddr string
	// PprofAddr serves Go's /debug/pprof profiles, for benchmarks; "0" (the default) disables
	// them. Keep it on loopback: profiles are not authenticated.
	PprofAddr string
	// Election is the leader election: on, and its timings.
	Election election.Options
	// LeaderElectionNamespace holds the leader lease.
	LeaderElectionNamespace string
	// SiteHeartbeat is how often a reachable site is probed.
	SiteHeartbeat time.Duration
	// SiteStatusReport is how often a probe that finds nothing new is written to the Site.
	SiteStatusReport time.Duration
	// SiteMinRetry is the first re-probe delay of an unreachable site.
	SiteMinRetry time.Duration
	// OperationPoll is how often a site is read while a campaign's operation runs there.
	OperationPoll time.Duration
	// OperationPollRate bounds the operation polls of all sites together, per second.
	OperationPollRate float64
	// SiteTimeout bounds each request to a site.
	SiteTimeout time.Duration
	// MaxKubeconfigTTL is the longest a cluster user's kubeconfig credential lives.
	MaxKubeconfigTTL time.Duration
	// SiteLogWait bounds the wait for a site component's log lines (the log viewer).
	SiteLogWait time.Duration
	// SiteAPIURL is the URL at which sites reach the artifact API; with it, the controller
	// gives every site a token of its own.
	SiteAPIURL string
	// SiteAPICAFile is the PEM CA bundle sites verify the artifact API with.
	SiteAPICAFile string
	// SiteIdentityNamespace holds the sites' ServiceAccounts.
	SiteIdentityNamespace string
	// SiteTokenTTL is the lifetime of each site's token.
	SiteTokenTTL time.Duration
	// Concurrency is the number of sites (and hosts) reconciled in parallel.
	Concurrency int
	// APIAddr serves the artifact REST API; "0" disables it.
	APIAddr string
	// APITLSCertFile and APITLSKeyFile make the API serve HTTPS; without them it serves HTTP.
	APITLSCertFile, APITLSKeyFile string
	// UI serves the web UI under /ui/ on the artifact API's server (same address, same TLS);
	// there is none while the artifact API is disabled.
	UI bool
	// APIBodyReadTimeout is how long an upload body may send nothing before it is cut.
	APIBodyReadTimeout time.Duration
	// APITransferMemory is the memory budget, in bytes, of all uploads' and downloads' buffers
	// together.
	APITransferMemory int64
	// MaxArtifactSize is the largest size, in bytes, an upload may declare.
	MaxArtifactSize int64
	// ArtifactSpaceReserve is the free space, in bytes, that new uploads leave on the volume of
	// the embedded FerretDB.
	ArtifactSpaceReserve int64
	// MongoURI of the artifact store; empty starts an embedded FerretDB in DataDir.
	MongoURI string
	// MongoDatabase is the database of the artifact store.
	MongoDatabase string
	// DataDir holds the embedded FerretDB's files.
	DataDir string
	// UploadTTL is how long an upload session lives without receiving a chunk.
	UploadTTL time.Duration
	// JanitorInterval is how often expired upload sessions are deleted.
	JanitorInterval time.Duration
	// KubeAPIQPS and KubeAPIBurst bound the controller's requests to the global cluster's API
	// server (a campaign dispatches one patch per site); QPS 0 sets no client-side limit and
	// leaves it to the API server's priority and fairness, as controller-runtime does.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// CampaignConcurrency is the number of campaigns reconciled in parallel.
	CampaignConcurrency int
	// CampaignDispatchConcurrency bounds each campaign reconcile's Site patches in flight.
	CampaignDispatchConcurrency int
	// CampaignResync is how often an unfinished campaign is looked at without any event.
	CampaignResync time.Duration
	// ReleaseRecheck is how often a release with missing artifacts, or artifacts of the wrong
	// kind, is checked again.
	ReleaseRecheck time.Duration
	// WebhookPort serves the admission webhooks (a Release naming missing artifacts, or
	// artifacts of another kind than its field takes, is refused); 0 disables them. They need
	// the artifact store, so the artifact API too.
	WebhookPort int
	// WebhookCertDir holds the webhook server's tls.crt and tls.key.
	WebhookCertDir string
	// Istio is meshpolicy.ModeAuto, ModeOn or ModeOff: whether the controller keeps its
	// PeerAuthentication and AuthorizationPolicy current.
	Istio string
	// IstioNamespace is the namespace of the controller's pods and of its mesh policies.
	IstioNamespace string
	// IstioAPIPrincipals are the mesh identities that may call the artifact API and web UI.
	IstioAPIPrincipals []string
	// IstioWebhookSourceRanges are the API servers' addresses, which call the webhooks from
	// outside the mesh.
	IstioWebhookSourceRanges []string
	// UninstallMeshPolicies deletes the mesh policies and exits, instead of running.
	UninstallMeshPolicies bool
	// EnrollmentTokenTTL is the lifetime of an enrollment token when its request names none;
	// EnrollmentTokenMaxTTL the longest a request may ask for.
	EnrollmentTokenTTL, EnrollmentTokenMaxTTL time.Duration
	// EnrollmentTokenRetention is how long a token's record is kept after it expired.
	EnrollmentTokenRetention time.Duration
	// EnrollmentTokenMaxFailures is how many attempts with a token may fail or be refused
	// before every further one is.
	EnrollmentTokenMaxFailures int
	// EnrollmentAllowedNetworks are where a site's API server may be, at enrollment and
	// after, although its address is loopback, link-local, unspecified or multicast (refused
	// by default).
	EnrollmentAllowedNetworks []netip.Prefix
	// Vault is the Vault server holding the BMC credentials and site kubeconfigs that Hosts
	// and Sites reference there, and how the controller logs in (pkg/vaultauth); an empty
	// Vault.Addr runs without Vault.
	Vault vaultauth.Options
	// VaultMount is the KV version 2 mount and VaultPrefix the path under it; each namespace's
	// references are under <VaultPrefix>/<namespace>/.
	VaultMount, VaultPrefix string
	// VaultRetryAfter is how long, after Vault did not answer, references are reported
	// unreadable without asking it (vaultref.Breaker).
	VaultRetryAfter time.Duration
}

// DefaultOptions returns safe production defaults.
func DefaultOptions() Options {
	return Options{
		MetricsAddr:             ":8080",
		ProbeAddr:               ":8081",
		PprofAddr:               "0",
		Election:                election.Defaults(),
		LeaderElectionNamespace: "edgefleet-system",
		SiteHeartbeat:           time.Minute,
		SiteStatusReport:        5 * time.Minute,
		SiteMinRetry:            2 * time.Second,
		OperationPoll:           5 * time.Second,
		OperationPollRate:       200,
		SiteIdentityNamespace:   "edgefleet-system",
		SiteTokenTTL:            24 * time.Hour,
		SiteTimeout:             10 * time.Second,
		MaxKubeconfigTTL:        clustercred.DefaultMaxTTL,
		SiteLogWait:             sitelogapi.DefaultWait,
		Concurrency:             16,
		APIAddr:                 "127.0.0.1:8090",
		UI:                      true,
		APIBodyReadTimeout:      artifactapi.DefaultBodyReadTimeout,
		APITransferMemory:       artifacts.DefaultTransferMemory,
		MaxArtifactSize:         artifacts.DefaultMaxArtifactSize,
		ArtifactSpaceReserve:    artifacts.DefaultSpaceReserve,
		MongoDatabase:           "edgefleet",
		DataDir:                 "/var/lib/edgefleet",
		UploadTTL:               24 * time.Hour,
		JanitorInterval:         10 * time.Minute,

		KubeAPIQPS:                  0,
		KubeAPIBurst:                200,
		CampaignConcurrency:         4,
		CampaignDispatchConcurrency: 32,
		CampaignResync:              30 * time.Second,
		ReleaseRecheck:              30 * time.Second,

		Istio:                      meshpolicy.ModeAuto,
		IstioNamespace:             "edgefleet-system",
		IstioAPIPrincipals:         []string{meshpolicy.ServiceAccount("istio-system", "istio-ingressgateway-service-account")},
		EnrollmentTokenTTL:         4 * time.Hour,
		EnrollmentTokenMaxTTL:      7 * 24 * time.Hour,
		EnrollmentTokenRetention:   7 * 24 * time.Hour,
		EnrollmentTokenMaxFailures: 5,
		Vault:                      vaultauth.DefaultOptions(),
		VaultMount:                 "secret",
		VaultPrefix:                "edgefleet/global",
		VaultRetryAfter:            15 * time.Second,
	}
}

// AddFlags binds the options to command-line flags.
// quantity is a flag.Func setting *into to a Kubernetes quantity's value (128Mi, 64Gi).
func quantity(into *int64) func(string) error {
	return func(v string) error {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return err
		}
		*into = q.Value()
		return nil
	}
}

func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of the global cluster (empty: in-cluster config).")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "Address of the Prometheus metrics endpoint (\"0\" disables it).")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr, "Address of the /healthz and /readyz endpoints (\"0\" disables them).")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", o.PprofAddr, "Address of Go's /debug/pprof profiles (\"0\", the default, disables them; unauthenticated: keep it on loopback).")
	o.Election.AddFlags(fs)
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "Namespace of the leader election lease.")
	fs.DurationVar(&o.SiteHeartbeat, "site-heartbeat-interval", o.SiteHeartbeat, "How often a reachable site is probed.")
	fs.DurationVar(&o.SiteStatusReport, "site-status-report-interval", o.SiteStatusReport, "How often a probe that finds nothing new is written to the Site (status.lastCheckTime, status.lastHeartbeatTime); changes are written at once. The metric edgefleet_site_last_probe_timestamp_seconds has every probe.")
	fs.DurationVar(&o.SiteMinRetry, "site-min-retry-interval", o.SiteMinRetry, "First re-probe delay of an unreachable site; it doubles up to the heartbeat interval.")
	fs.DurationVar(&o.OperationPoll, "site-operation-poll-interval", o.OperationPoll, "How often a site is read while a campaign's operation runs there (the heartbeat interval when that is shorter).")
	fs.Float64Var(&o.OperationPollRate, "site-operation-poll-rate", o.OperationPollRate, "At most this many operation polls a second, all sites together: with more operations in flight, each site is polled less often than --site-operation-poll-interval.")
	fs.DurationVar(&o.SiteTimeout, "site-timeout", o.SiteTimeout, "Timeout of each request to a site.")
	fs.DurationVar(&o.MaxKubeconfigTTL, "max-kubeconfig-ttl", o.MaxKubeconfigTTL, "Longest lifetime of a cluster user's kubeconfig credential (POST .../sites/{site}/kubeconfig); longer requests get this. The sites' BPAs cap it with their own --max-credential-ttl.")
	fs.DurationVar(&o.SiteLogWait, "site-log-wait", o.SiteLogWait, "How long the log viewer (GET .../sites/{site}/log, the web UI, `edgefleet site logs`) waits for a site component's answer before it answers 504.")
	fs.StringVar(&o.SiteAPIURL, "site-api-url", o.SiteAPIURL, "URL at which sites reach the artifact API; with it every site gets a token of its own (empty: sites' access is set up by hand).")
	fs.StringVar(&o.SiteAPICAFile, "site-api-ca-file", o.SiteAPICAFile, "PEM CA bundle the sites verify the artifact API's certificate with.")
	fs.StringVar(&o.SiteIdentityNamespace, "site-identity-namespace", o.SiteIdentityNamespace, "Namespace of the sites' ServiceAccounts on the global cluster.")
	fs.DurationVar(&o.SiteTokenTTL, "site-token-ttl", o.SiteTokenTTL, "Lifetime of each site's artifact API token; it is renewed when half of it is gone (at least 10m).")
	fs.IntVar(&o.Concurrency, "concurrency", o.Concurrency, "Sites and hosts reconciled in parallel.")
	fs.StringVar(&o.APIAddr, "api-bind-address", o.APIAddr, "Address of the artifact REST API (\"0\" disables it). Without TLS files it serves plain HTTP: keep it on loopback then.")
	fs.StringVar(&o.APITLSCertFile, "api-tls-cert-file", o.APITLSCertFile, "Serving certificate of the artifact REST API (PEM); with --api-tls-key-file the API serves HTTPS.")
	fs.StringVar(&o.APITLSKeyFile, "api-tls-key-file", o.APITLSKeyFile, "Private key of --api-tls-cert-file (PEM).")
	fs.BoolVar(&o.UI, "ui", o.UI, "Serve the web UI under /ui/ on the artifact API's address, with its TLS (none while --api-bind-address is 0).")
	fs.DurationVar(&o.APIBodyReadTimeout, "api-body-read-timeout", o.APIBodyReadTimeout, "How long an upload's body may send nothing before the upload is cut (408; an upload session keeps what arrived). It bounds each read, not the whole upload.")
	fs.Func("api-transfer-memory", fmt.Sprintf("Memory budget of all artifact uploads' and downloads' buffers together, a quantity such as 128Mi (default %s, at least %s): a transfer takes smaller database batches when it is short, and waits when it is gone.", resource.NewQuantity(artifacts.DefaultTransferMemory, resource.BinarySI), resource.NewQuantity(artifacts.MinTransferMemory, resource.BinarySI)), quantity(&o.APITransferMemory))
	fs.Func("max-artifact-size", fmt.Sprintf("Largest size an artifact upload may declare, a quantity such as 100Gi (default %s): a larger one is refused at once (413). With --mongo-uri it is the only bound, the controller cannot see the database's disk; with the embedded FerretDB a declared size must also fit in the free space of --data-dir's volume (507, see --artifact-space-reserve).", resource.NewQuantity(artifacts.DefaultMaxArtifactSize, resource.BinarySI)), quantity(&o.MaxArtifactSize))
	fs.Func("artifact-space-reserve", fmt.Sprintf("Free space, a quantity such as 5Gi (default %s), that new artifact uploads leave on the volume of the embedded FerretDB (--data-dir): an upload whose declared size (about 4/3 of it on disk) and the rest of the open uploads' declared sizes do not fit in the free space less this is refused at once (507). Not used with --mongo-uri.", resource.NewQuantity(artifacts.DefaultSpaceReserve, resource.BinarySI)), quantity(&o.ArtifactSpaceReserve))
	fs.StringVar(&o.MongoURI, "mongo-uri", o.MongoURI, "MongoDB URI of the artifact store (empty: FerretDB embedded on SQLite in --data-dir).")
	fs.StringVar(&o.MongoDatabase, "mongo-database", o.MongoDatabase, "MongoDB database of the artifact store.")
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "Directory of the embedded FerretDB's files (with no --mongo-uri).")
	fs.DurationVar(&o.UploadTTL, "upload-ttl", o.UploadTTL, "How long an artifact upload session lives without receiving a chunk.")
	fs.DurationVar(&o.JanitorInterval, "janitor-interval", o.JanitorInterval, "How often expired upload sessions (and enrollment token records past their retention) are deleted.")
	fs.Func("kube-api-qps", "Requests per second to the global cluster's API server (default 0: no client-side limit, the API server's priority and fairness applies).", func(v string) error {
		q, err := strconv.ParseFloat(v, 32)
		o.KubeAPIQPS = float32(q)
		return err
	})
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst of requests to the global cluster's API server.")
	fs.IntVar(&o.CampaignConcurrency, "campaign-concurrency", o.CampaignConcurrency, "Campaigns reconciled in parallel.")
	fs.IntVar(&o.CampaignDispatchConcurrency, "campaign-dispatch-concurrency", o.CampaignDispatchConcurrency, "Site patches in flight at once for each campaign.")
	fs.DurationVar(&o.CampaignResync, "campaign-resync-interval", o.CampaignResync, "How often an unfinished campaign is looked at without any event.")
	fs.DurationVar(&o.ReleaseRecheck, "release-recheck-interval", o.ReleaseRecheck, "How often a release with missing artifacts, or artifacts of the wrong kind, is checked again.")
	fs.IntVar(&o.WebhookPort, "webhook-port", o.WebhookPort, "Port of the admission webhooks (0 disables them; deploy/webhook has their configuration).")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", o.WebhookCertDir, "Directory of the webhook server's tls.crt and tls.key.")
	fs.StringVar(&o.Istio, "istio", o.Istio, "Keep the controller's Istio PeerAuthentication (STRICT mTLS) and AuthorizationPolicy current: \"auto\" (where Istio's CRDs are installed), \"on\" (fail without them) or \"off\" (docs/security.md).")
	fs.StringVar(&o.IstioNamespace, "istio-namespace", o.IstioNamespace, "Namespace of the controller's pods, where its mesh policies live.")
	fs.Func("istio-api-principals", fmt.Sprintf("Comma-separated mesh identities (cluster.local/ns/<namespace>/sa/<service account>) that may call the artifact API and web UI; callers outside the mesh (sites, browsers, the CLI) come through an ingress gateway, whose identity goes here (default %s).", strings.Join(o.IstioAPIPrincipals, ",")), func(v string) error {
		o.IstioAPIPrincipals = meshpolicy.SplitList(v)
		return nil
	})
	fs.Func("istio-webhook-source-ranges", "Comma-separated addresses (CIDRs or IPs) of the Kubernetes API servers, which call the webhooks from outside the mesh (default none: the webhook port is closed by the mesh).", func(v string) error {
		o.IstioWebhookSourceRanges = meshpolicy.SplitList(v)
		return nil
	})
	fs.BoolVar(&o.UninstallMeshPolicies, "uninstall-mesh-policies", o.UninstallMeshPolicies, "Delete the controller's PeerAuthentication and AuthorizationPolicy in --istio-namespace and exit (the uninstall's step; nothing to do where Istio's CRDs are absent).")
	fs.DurationVar(&o.EnrollmentTokenTTL, "enrollment-token-ttl", o.EnrollmentTokenTTL, "Lifetime of a site enrollment token whose request names none.")
	fs.DurationVar(&o.EnrollmentTokenMaxTTL, "enrollment-token-max-ttl", o.EnrollmentTokenMaxTTL, "Longest lifetime a site enrollment token may be issued with.")
	fs.DurationVar(&o.EnrollmentTokenRetention, "enrollment-token-retention", o.EnrollmentTokenRetention, "How long the record of an enrollment token (who used it, when) is kept after the token expired; the janitor deletes it then.")
	fs.IntVar(&o.EnrollmentTokenMaxFailures, "enrollment-token-max-failures", o.EnrollmentTokenMaxFailures, "How many enrollment attempts with a token may be refused or fail (the site unreachable, the credential refused, ...) before every further attempt with it is refused and a new token must be issued.")
	fs.Func("enrollment-allowed-networks", "Comma-separated CIDRs where an enrolling site's API server may be although its address is loopback, link-local (169.254.0.0/16, fe80::/10: cloud metadata endpoints), AWS's IPv6 metadata endpoint (fd00:ec2::254), unspecified or multicast; the global controller connects to no such address of a site's API server otherwise, at enrollment or after (each connection resolves the name again and checks it; default none; test beds on one machine pass 127.0.0.0/8,::1/128).", func(v string) error {
		nets, err := siteclient.ParseNetworks(v)
		if err != nil {
			return err
		}
		o.EnrollmentAllowedNetworks = nets
		return nil
	})
	fs.StringVar(&o.Vault.Addr, "vault-addr", o.Vault.Addr, "Vault server holding the BMC credentials and site kubeconfigs that Hosts (spec.bmc.credentialsVaultRef) and Sites (spec.kubeconfigVaultRef) reference there (empty: no Vault, such references are reported unusable). The controller logs in as --vault-auth says.")
	fs.DurationVar(&o.Vault.Timeout, "vault-timeout", o.Vault.Timeout, "Bound of each Vault call (logins and renewals included).")
	o.Vault.AddFlags(fs)
	fs.StringVar(&o.VaultMount, "vault-mount", o.VaultMount, "Mount of Vault's KV version 2 engine.")
	fs.StringVar(&o.VaultPrefix, "vault-prefix", o.VaultPrefix, "Path under --vault-mount of the referenced entries: a reference of namespace N with path P is <prefix>/N/P.")
	fs.DurationVar(&o.VaultRetryAfter, "vault-retry-after", o.VaultRetryAfter, "After Vault did not answer (no connection, --vault-timeout met, a 5xx), how long references are reported unreadable without asking it again: an outage then costs one timeout per this interval, not one per host.")
}

// Validate names the first bad option.
func (o *Options) Validate() error {
	if err := o.Election.Validate(); err != nil {
		return err
	}
	switch {
	case o.SiteHeartbeat <= 0:
		return fmt.Errorf("--site-heartbeat-interval must be positive, got %s", o.SiteHeartbeat)
	case o.OperationPoll <= 0:
		return fmt.Errorf("--site-operation-poll-interval must be positive, got %s", o.OperationPoll)
	case o.SiteStatusReport <= 0:
		return fmt.Errorf("--site-status-report-interval must be positive, got %s", o.SiteStatusReport)
	case o.OperationPollRate <= 0:
		return fmt.Errorf("--site-operation-poll-rate must be positive, got %g", o.OperationPollRate)
	case o.SiteMinRetry <= 0 || o.SiteMinRetry > o.SiteHeartbeat:
		return fmt.Errorf("--site-min-retry-interval must be positive and at most --site-heartbeat-interval (%s), got %s", o.SiteHeartbeat, o.SiteMinRetry)
	case o.SiteTimeout <= 0:
		return fmt.Errorf("--site-timeout must be positive, got %s", o.SiteTimeout)
	case o.MaxKubeconfigTTL <= 0:
		return fmt.Errorf("--max-kubeconfig-ttl must be positive, got %s", o.MaxKubeconfigTTL)
	case o.SiteLogWait <= 0:
		return fmt.Errorf("--site-log-wait must be positive, got %s", o.SiteLogWait)
	case o.SiteTokenTTL < 10*time.Minute:
		return fmt.Errorf("--site-token-ttl must be at least 10m (the API server's shortest token), got %s", o.SiteTokenTTL)
	case o.SiteIdentityNamespace == "":
		return errors.New("--site-identity-namespace must not be empty")
	case o.Concurrency < 1:
		return fmt.Errorf("--concurrency must be at least 1, got %d", o.Concurrency)
	case (o.APITLSCertFile == "") != (o.APITLSKeyFile == ""):
		return errors.New("--api-tls-cert-file and --api-tls-key-file go together")
	case o.APIAddr != "0" && o.APITLSCertFile == "" && !httpserver.Loopback(o.APIAddr):
		return fmt.Errorf("--api-bind-address %s is not a loopback address: give --api-tls-cert-file and --api-tls-key-file, bearer tokens must not cross a network in clear", o.APIAddr)
	case o.APIBodyReadTimeout <= 0:
		return fmt.Errorf("--api-body-read-timeout must be positive, got %s", o.APIBodyReadTimeout)
	case o.APITransferMemory < artifacts.MinTransferMemory:
		return fmt.Errorf("--api-transfer-memory must be at least %s, got %d bytes", resource.NewQuantity(artifacts.MinTransferMemory, resource.BinarySI), o.APITransferMemory)
	case o.MaxArtifactSize <= 0:
		return fmt.Errorf("--max-artifact-size must be positive, got %d bytes", o.MaxArtifactSize)
	case o.ArtifactSpaceReserve <= 0:
		return fmt.Errorf("--artifact-space-reserve must be positive, got %d bytes", o.ArtifactSpaceReserve)
	case o.MongoURI == "" && o.DataDir == "":
		return errors.New("--data-dir is needed for the embedded FerretDB when no --mongo-uri is given")
	case o.UploadTTL <= 0:
		return fmt.Errorf("--upload-ttl must be positive, got %s", o.UploadTTL)
	case o.JanitorInterval <= 0:
		return fmt.Errorf("--janitor-interval must be positive, got %s", o.JanitorInterval)
	case o.KubeAPIQPS < 0 || o.KubeAPIBurst < 1:
		return fmt.Errorf("--kube-api-qps must be at least 0 and --kube-api-burst at least 1, got %g and %d", o.KubeAPIQPS, o.KubeAPIBurst)
	case o.CampaignConcurrency < 1:
		return fmt.Errorf("--campaign-concurrency must be at least 1, got %d", o.CampaignConcurrency)
	case o.CampaignDispatchConcurrency < 1:
		return fmt.Errorf("--campaign-dispatch-concurrency must be at least 1, got %d", o.CampaignDispatchConcurrency)
	case o.CampaignResync <= 0:
		return fmt.Errorf("--campaign-resync-interval must be positive, got %s", o.CampaignResync)
	case o.ReleaseRecheck <= 0:
		return fmt.Errorf("--release-recheck-interval must be positive, got %s", o.ReleaseRecheck)
	case o.WebhookPort < 0 || o.WebhookPort > 65535:
		return fmt.Errorf("--webhook-port must be a port or 0, got %d", o.WebhookPort)
	case o.WebhookPort != 0 && o.APIAddr == "0":
		return errors.New("--webhook-port needs the artifact store: the artifact API cannot be disabled (--api-bind-address 0) then")
	case o.WebhookPort != 0 && o.WebhookCertDir == "":
		return errors.New("--webhook-port needs --webhook-cert-dir")
	case o.IstioNamespace == "":
		return errors.New("--istio-namespace must not be empty")
	case o.EnrollmentTokenTTL < time.Minute || o.EnrollmentTokenMaxTTL < o.EnrollmentTokenTTL:
		return fmt.Errorf("--enrollment-token-ttl must be at least 1m and at most --enrollment-token-max-ttl, got %s and %s", o.EnrollmentTokenTTL, o.EnrollmentTokenMaxTTL)
	case o.EnrollmentTokenRetention < 0:
		return fmt.Errorf("--enrollment-token-retention must not be negative, got %s", o.EnrollmentTokenRetention)
	case o.EnrollmentTokenMaxFailures < 1:
		return fmt.Errorf("--enrollment-token-max-failures must be at least 1, got %d", o.EnrollmentTokenMaxFailures)
	}
	if o.Vault.Addr != "" {
		switch {
		case o.VaultMount == "":
			return errors.New("--vault-mount must not be empty with --vault-addr")
		case strings.Trim(o.VaultPrefix, "/") == "":
			return errors.New("--vault-prefix must not be empty with --vault-addr: the controller reads and writes only under it")
		case o.VaultRetryAfter <= 0:
			return fmt.Errorf("--vault-retry-after must be positive, got %s", o.VaultRetryAfter)
		}
		if err := o.Vault.Validate(); err != nil {
			return err
		}
	}
	if err := meshpolicy.ValidateMode(o.Istio); err != nil {
		return err
	}
	if _, err := meshComponent(*o); err != nil {
		return err
	}
	return nil
}

// Scheme returns the scheme of the global controller's manager.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, fleetv1.AddToScheme, securityv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	return s, nil
}

// Run starts the global controller and blocks until ctx is done.
func Run(ctx context.Context, opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	cfg, err := restconfig.Load(opts.Kubeconfig)
	if err != nil {
		return err
	}
	if opts.UninstallMeshPolicies {
		return meshpolicy.Uninstall(ctx, cfg, opts.IstioNamespace, MeshPolicyName, meshPolicyTimeout)
	}
	cfg.QPS, cfg.Burst = opts.KubeAPIQPS, opts.KubeAPIBurst
	if opts.KubeAPIQPS == 0 {
		cfg.QPS = -1 // no client-side rate limiter
	}
	scheme, err := Scheme()
	if err != nil {
		return err
	}
	mopts := ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress: opts.ProbeAddr,
		PprofBindAddress:       opts.PprofAddr,
	}
	opts.Election.Apply(&mopts, "edgefleet-global-controller", opts.LeaderElectionNamespace)
	if opts.WebhookPort != 0 {
		mopts.WebhookServer = webhook.NewServer(webhook.Options{Port: opts.WebhookPort, CertDir: opts.WebhookCertDir})
	}
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add ready check: %w", err)
	}
	siteMetrics, err := site.NewMetrics(metrics.Registry)
	if err != nil {
		return fmt.Errorf("register site metrics: %w", err)
	}
	campaignMetrics, err := campaign.NewMetrics(metrics.Registry)
	if err != nil {
		return fmt.Errorf("register campaign metrics: %w", err)
	}
	deps := Dependencies{
		SiteMetrics: siteMetrics, CampaignMetrics: campaignMetrics,
		Sites: siteclient.NewCache(opts.SiteTimeout, "edgefleet-global-controller/"+version.Version, siteclient.AddressPolicy{Allowed: opts.EnrollmentAllowedNetworks}),
	}
	if opts.Vault.Addr != "" {
		vault, err := vaultauth.Connect(ctx, opts.Vault, ctrl.Log.WithName("vault"))
		if err != nil {
			return err
		}
		deps.Vault = vaultref.NewBreaker(vaultref.New(vault.Client, opts.VaultMount, opts.VaultPrefix), opts.VaultRetryAfter)
	}
	if opts.APIAddr != "0" {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("client for token and access reviews: %w", err)
		}
		auth := kubeauth.NewReviewer(kubeauth.Config{Client: cs, Group: "fleet.edgefleet.io", Resource: "artifacts"})
		store, stop, err := setupArtifactAPI(ctx, mgr, opts, release.References{Reader: mgr.GetAPIReader()}, auth, deps)
		if err != nil {
			return err
		}
		defer stop()
		deps.Artifacts = storeContent{store}
	}
	if err := SetupReconcilers(ctx, mgr, opts, deps); err != nil {
		return err
	}
	mesh, err := meshComponent(opts)
	if err != nil {
		return err
	}
	if err := meshpolicy.Setup(ctx, mgr, opts.Istio, mesh, meshPolicyTimeout); err != nil {
		return err
	}
	if opts.WebhookPort != 0 {
		if err := (&webhooks.ReleaseValidator{Artifacts: deps.Artifacts}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("set up release webhook: %w", err)
		}
		if err := webhooks.SetupWindowValidators(mgr, time.Now); err != nil {
			return fmt.Errorf("set up maintenance window webhooks: %w", err)
		}
		if err := (&webhooks.SiteVersionValidator{Releases: mgr.GetAPIReader()}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("set up site version webhook: %w", err)
		}
		// Not ready before the webhooks answer: with failurePolicy Fail the API server refuses
		// every write they check until then.
		if err := mgr.AddReadyzCheck("webhooks", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return fmt.Errorf("add webhook ready check: %w", err)
		}
	}
	ctrl.Log.WithName("setup").Info("starting global controller", "version", version.Version)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

// Dependencies are what the reconcilers get from outside the manager.
type Dependencies struct {
	// SiteMetrics and CampaignMetrics are registered metrics; nil disables them.
	SiteMetrics     *site.Metrics
	CampaignMetrics *campaign.Metrics
	// Artifacts is the artifact store releases are checked against; nil when the artifact API
	// is disabled.
	Artifacts release.Artifacts
	// Sites keeps the clients of the sites, shared by the site reconciler (which connects
	// them) and the kubeconfig API; a new cache when nil.
	Sites *siteclient.Cache
	// Vault holds what Hosts and Sites reference there; nil without Vault.
	Vault vaultref.Store
}

// SetupReconcilers registers the indexes and every reconciler on mgr.
func SetupReconcilers(ctx context.Context, mgr manager.Manager, opts Options, deps Dependencies) error {
	if err := index.Setup(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	copts := controller.Options{MaxConcurrentReconciles: opts.Concurrency}
	siteClients := deps.Sites
	if siteClients == nil {
		siteClients = siteclient.NewCache(opts.SiteTimeout, "edgefleet-global-controller/"+version.Version, siteclient.AddressPolicy{Allowed: opts.EnrollmentAllowedNetworks})
	}
	sites := &site.Reconciler{
		Client:                mgr.GetClient(),
		APIReader:             mgr.GetAPIReader(),
		Sites:                 siteClients,
		Vault:                 deps.Vault,
		Recorder:              recorder.Bounded(mgr.GetEventRecorder("site-controller")),
		Metrics:               deps.SiteMetrics,
		Clock:                 clock.RealClock{},
		HeartbeatInterval:     opts.SiteHeartbeat,
		StatusReportInterval:  opts.SiteStatusReport,
		OperationPollInterval: min(opts.OperationPoll, opts.SiteHeartbeat),
		OperationPollRate:     opts.OperationPollRate,
		MinRetryInterval:      opts.SiteMinRetry,
		ArtifactAccess:        site.ArtifactAccess{URL: opts.SiteAPIURL, Namespace: opts.SiteIdentityNamespace, TokenTTL: opts.SiteTokenTTL},
	}
	if opts.SiteAPICAFile != "" {
		ca, err := os.ReadFile(opts.SiteAPICAFile)
		if err != nil {
			return fmt.Errorf("--site-api-ca-file: %w", err)
		}
		sites.ArtifactAccess.CA = ca
	}
	if err := sites.SetupWithManager(mgr, copts); err != nil {
		return fmt.Errorf("set up site reconciler: %w", err)
	}
	hosts := &host.Reconciler{Client: mgr.GetClient(), Recorder: recorder.Bounded(mgr.GetEventRecorder("host-controller"))}
	if err := hosts.SetupWithManager(mgr, copts); err != nil {
		return fmt.Errorf("set up host reconciler: %w", err)
	}
	releases := &release.Reconciler{
		Client:          mgr.GetClient(),
		Recorder:        recorder.Bounded(mgr.GetEventRecorder("release-controller")),
		RecheckInterval: opts.ReleaseRecheck,
	}
	if deps.Artifacts != nil {
		releases.Artifacts = deps.Artifacts
	}
	if err := releases.SetupWithManager(mgr, copts); err != nil {
		return fmt.Errorf("set up release reconciler: %w", err)
	}
	campaigns := &campaign.Reconciler{
		Client:              mgr.GetClient(),
		Recorder:            recorder.Bounded(mgr.GetEventRecorder("campaign-controller")),
		Metrics:             deps.CampaignMetrics,
		Clock:               clock.RealClock{},
		DispatchConcurrency: opts.CampaignDispatchConcurrency,
		ResyncInterval:      opts.CampaignResync,
	}
	if err := campaigns.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: opts.CampaignConcurrency}); err != nil {
		return fmt.Errorf("set up campaign reconciler: %w", err)
	}
	return nil
}

// storeContent answers the release webhook and reconciler from the artifact store.
type storeContent struct{ store *artifacts.Store }

func (s storeContent) KindsOf(ctx context.Context, sha256 string) ([]restv1.ArtifactKind, error) {
	return s.store.KindsOf(ctx, sha256)
}

func (s storeContent) Manifest(ctx context.Context, sha256 string) (*packages.Manifest, error) {
	m, err := s.store.Manifest(ctx, sha256)
	if errors.Is(err, artifacts.ErrNotFound) {
		return nil, nil
	}
	return m, err
}
