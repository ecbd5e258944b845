package site_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/edgefleet/edgefleet/global-controller/index"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/host"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/site"
	"github.com/edgefleet/edgefleet/pkg/siteclient"
	"github.com/edgefleet/edgefleet/pkg/vaultref"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testvault"
)

// global is the global cluster: a real API server with the fleet CRDs, and the site and host
// reconcilers running against it in a manager. Each test starts the site control planes it needs.
var global *controlplane.ControlPlane

// metrics is the registry of the site reconciler's metrics.
var metrics *prometheus.Registry

// Short intervals so state changes show within seconds.
const (
	heartbeat = 2 * time.Second
	// statusReport is how often a probe that finds nothing new is written to the Site.
	statusReport = 3 * heartbeat
	minRetry     = 250 * time.Millisecond
	timeout      = 2 * time.Second
	// identityNamespace holds the sites' ServiceAccounts.
	identityNamespace = "edgefleet-system"
	// vaultPrefix is where the reconciler reads references, under the KV mount "secret".
	vaultPrefix = "edgefleet/global"
)

// vault is a Vault dev server holding what Sites and Hosts reference there; the reconciler reads
// it as the global controller does (through a vaultref.Breaker), with the root token, a short
// bound on each call and as short a pause after Vault did not answer (vaultTimeout).
var vault *testvault.Vault

const vaultTimeout = 2 * time.Second

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "site-suite-vault-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if vault, err = testvault.StartVaultIn(context.Background(), dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := vault.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop vault:", err)
		}
	}()
	vaultClient, err := vault.Client.Clone()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	vaultClient.SetToken(vault.Client.Token())
	vaultClient.SetClientTimeout(vaultTimeout)
	return controlplane.RunWithManager(m, controlplane.Options{Name: "global", InstallCRDs: true},
		func(ctx context.Context, cp *controlplane.ControlPlane, mgr manager.Manager) error {
			global = cp
			if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: identityNamespace}}); err != nil {
				return err
			}
			metrics = prometheus.NewRegistry()
			siteMetrics, err := site.NewMetrics(metrics)
			if err != nil {
				return err
			}
			if err := index.Setup(ctx, mgr.GetFieldIndexer()); err != nil {
				return err
			}
			r := &site.Reconciler{
				Client:                mgr.GetClient(),
				APIReader:             mgr.GetAPIReader(),
				Sites:                 siteclient.NewCache(timeout, "site-reconciler-test", siteclient.AddressPolicy{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}),
				Vault:                 vaultref.NewBreaker(vaultref.New(vaultClient, "secret", vaultPrefix), vaultTimeout),
				Recorder:              mgr.GetEventRecorder("site-controller"),
				Metrics:               siteMetrics,
				Clock:                 clock.RealClock{},
				HeartbeatInterval:     heartbeat,
				StatusReportInterval:  statusReport,
				OperationPollInterval: heartbeat / 4,
				MinRetryInterval:      minRetry,
				// Only sites that set spec.artifactAPIURL get tokens here (TestArtifactAccess).
				ArtifactAccess: site.ArtifactAccess{Namespace: identityNamespace, TokenTTL: time.Hour},
			}
			if err := r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 4}); err != nil {
				return err
			}
			// Hosts are pushed to a site once the host reconciler finds them Ready.
			hosts := &host.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("host-controller")}
			return hosts.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 2})
		})
}
