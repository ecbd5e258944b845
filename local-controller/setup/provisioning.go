package setup

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	capicluster "sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	capimachine "sigs.k8s.io/cluster-api/core/reconcilers/machine"
	capimachinedeployment "sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	capimachineset "sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	capisetup "sigs.k8s.io/cluster-api/core/setup"
	capiindex "sigs.k8s.io/cluster-api/util/index"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/local-controller/reconcilers/applicationcluster"
	"github.com/edgefleet/edgefleet/local-controller/reconcilers/edgebootstrap"
	"github.com/edgefleet/edgefleet/local-controller/reconcilers/edgecluster"
	"github.com/edgefleet/edgefleet/local-controller/reconcilers/edgemachine"
	"github.com/edgefleet/edgefleet/pkg/recorder"
	"github.com/edgefleet/edgefleet/pkg/version"
)

// What Cluster-API's core reconcilers, run in-process by setupProvisioning, need on the site
// cluster (their own markers, less what edgefleet does not run: ClusterClass, MachinePool (only watched and deleted with its cluster),
// MachineHealthCheck, ClusterResourceSet, IPAM, runtime extensions). Without them the local
// controller's least-privilege identity could not start (its caches would never sync).
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;clusters/status;clusters/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machines/status;machines/finalizers;machinesets;machinesets/status;machinesets/finalizers;machinedeployments;machinedeployments/status;machinedeployments/finalizers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinedrainrules,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinepools,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch

// setupProvisioning adds the site-provisioning controllers to mgr: Cluster-API's core
// reconcilers (Cluster, Machine, MachineSet, MachineDeployment) in-process, edgefleet's
// infrastructure provider over Metal3 (EdgeCluster, EdgeMachine), its bootstrap provider
// (EdgeBootstrapConfig) and the ApplicationCluster reconciler that drives them. It returns a
// function that stops Cluster-API's cluster cache once the manager stopped.
func setupProvisioning(ctx context.Context, mgr manager.Manager, opts Options) (func(), error) {
	if err := capiindex.AddDefaultIndexes(ctx, mgr); err != nil {
		return nil, fmt.Errorf("Cluster-API indexes: %w", err)
	}
	secrets, err := capisetup.CreateSecretCachingClient(mgr)
	if err != nil {
		return nil, fmt.Errorf("Cluster-API secret client: %w", err)
	}
	one := controller.Options{MaxConcurrentReconciles: opts.Concurrency}
	clusterCache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secrets,
		Cache:        capisetup.ClusterCacheCacheOptions(),
		Client:       capisetup.ClusterCacheClientOptions("edgefleet-local-controller/"+version.Version, 20, 30),
	}, one)
	if err != nil {
		return nil, fmt.Errorf("Cluster-API cluster cache: %w", err)
	}
	stop := func() {
		// The cluster cache's per-cluster caches outlive the manager otherwise.
		if s, ok := clusterCache.(interface{ Shutdown() }); ok {
			s.Shutdown()
		}
	}
	client, reader := mgr.GetClient(), mgr.GetAPIReader()
	var bootstrapper edgebootstrap.Bootstrapper = &edgebootstrap.Agent{Reader: reader, Namespace: opts.Namespace, Clusters: clusterCache}
	if opts.NodeBootstrapper != nil {
		bootstrapper = opts.NodeBootstrapper(clusterCache)
	}
	reconcilers := []struct {
		name  string
		setup func() error
	}{
		{"Cluster", func() error {
			return (&capicluster.Reconciler{Client: client, APIReader: reader, ClusterCache: clusterCache,
				RemoteConnectionGracePeriod: 50 * time.Second}).SetupWithManager(ctx, mgr, one)
		}},
		{"Machine", func() error {
			return (&capimachine.Reconciler{Client: client, APIReader: reader, ClusterCache: clusterCache,
				RemoteConditionsGracePeriod: 5 * time.Minute}).SetupWithManager(ctx, mgr, one)
		}},
		{"MachineSet", func() error {
			// No preflight checks: they guard control-plane providers and topologies, which an
			// edgefleet site does not use.
			return (&capimachineset.Reconciler{Client: client, APIReader: reader, ClusterCache: clusterCache,
				PreflightChecks: sets.New[clusterv1.MachineSetPreflightCheck]()}).SetupWithManager(ctx, mgr, one)
		}},
		{"MachineDeployment", func() error {
			return (&capimachinedeployment.Reconciler{Client: client, APIReader: reader}).SetupWithManager(ctx, mgr, one)
		}},
		{"EdgeCluster", func() error {
			return (&edgecluster.Reconciler{Client: client, Recorder: recorder.Bounded(mgr.GetEventRecorder("edgecluster-controller"))}).SetupWithManager(ctx, mgr, one)
		}},
		{"EdgeMachine", func() error {
			return (&edgemachine.Reconciler{Client: client, APIReader: reader, HostNamespace: sitev1.HostsNamespace, Recorder: recorder.Bounded(mgr.GetEventRecorder("edgemachine-controller")),
				RetryInterval: edgemachine.DefaultRetryInterval}).SetupWithManager(ctx, mgr, one)
		}},
		{"EdgeBootstrapConfig", func() error {
			return (&edgebootstrap.Reconciler{Client: client, Bootstrapper: bootstrapper,
				Recorder: recorder.Bounded(mgr.GetEventRecorder("edgebootstrapconfig-controller")), JoinRetry: 2 * time.Second}).SetupWithManager(mgr, one)
		}},
		{"ApplicationCluster", func() error {
			return (&applicationcluster.Reconciler{Client: client, HostNamespace: sitev1.HostsNamespace, Recorder: recorder.Bounded(mgr.GetEventRecorder("applicationcluster-controller")),
				Resync: 10 * time.Second, InPlaceUpgrades: opts.NodeBootstrapper == nil}).SetupWithManager(mgr, one)
		}},
	}
	for _, rc := range reconcilers {
		if err := rc.setup(); err != nil {
			stop()
			return nil, fmt.Errorf("set up the %s reconciler: %w", rc.name, err)
		}
	}
	return stop, nil
}
