package site

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/index"
	"github.com/edgefleet/edgefleet/pkg/conditions"
	"github.com/edgefleet/edgefleet/pkg/siteclient"
	"github.com/edgefleet/edgefleet/pkg/vaultref"
)

// Connections keeps one client per site (siteclient.Cache in production).
type Connections interface {
	// Connect makes sure the site has a client for the kubeconfig with this fingerprint,
	// calling read for the kubeconfig only when the fingerprint changed. It reports whether it
	// built a new client.
	Connect(ctx context.Context, site types.NamespacedName, fingerprint string, read func(context.Context) ([]byte, error)) (bool, error)
	// Probe asks the site for its versions.
	Probe(ctx context.Context, site types.NamespacedName) (siteclient.Probe, error)
	// Client returns the client that pushes objects to the site and reads them back.
	Client(site types.NamespacedName) (client.Client, error)
	// Forget drops the site's client.
	Forget(site types.NamespacedName)
}

// Reconciler reconciles Sites.
type Reconciler struct {
	// Client reads Sites, Hosts and Secret metadata from the cache and writes Sites.
	Client client.Client
	// APIReader reads Secret data (kubeconfigs, BMC credentials) straight from the API server;
	// Secrets are not cached.
	APIReader client.Reader
	// Vault holds the kubeconfigs and BMC credentials that Sites and Hosts reference in Vault
	// (spec.kubeconfigVaultRef, spec.bmc.credentialsVaultRef); nil when the controller runs
	// without Vault, and such references are then reported unusable.
	Vault vaultref.Store
	// Sites keeps the per-site clients.
	Sites Connections
	// Recorder emits an event on every condition change.
	Recorder events.EventRecorder
	// Metrics are updated after every probe; nil disables them.
	Metrics *Metrics
	// Clock tells the time.
	Clock clock.PassiveClock
	// HeartbeatInterval is how often a reachable site is probed.
	HeartbeatInterval time.Duration
	// StatusReportInterval is how often a probe that finds nothing new is written to the Site
	// (status.lastCheckTime, status.lastHeartbeatTime); a change is written at once.
	StatusReportInterval time.Duration
	// OperationPollInterval is how often a site is read while an operation runs there, so a
	// campaign sees a verdict soon after the site reaches it (heartbeats are much rarer).
	OperationPollInterval time.Duration
	// OperationPollRate bounds the operation polls of all sites together, per second: with
	// more sites in flight than it allows at OperationPollInterval, each is polled less often.
	// 0 sets no bound.
	OperationPollRate float64
	// ArtifactAccess gives each site its own token for the artifact API; a zero value leaves
	// the sites' access to be set up by hand.
	ArtifactAccess ArtifactAccess
	// MinRetryInterval is the first re-probe delay of an unreachable site; the delay doubles
	// while the site stays unreachable, up to HeartbeatInterval.
	MinRetryInterval time.Duration

	// pushed remembers the BMC Secrets each site's last push left there.
	pushed perSite[secretRecord]
	// inFlight are the sites with an operation that has no verdict yet.
	inFlight inFlight
	// probes are the sites' last probe times.
	probes perSite[probeTimes]
}

// +kubebuilder:rbac:groups=fleet.edgefleet.io,resources=sites,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleet.edgefleet.io,resources=sites/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.edgefleet.io,resources=sites/finalizers,verbs=update
// +kubebuilder:rbac:groups=fleet.edgefleet.io,resources=hosts,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.edgefleet.io,resources=releases,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.edgefleet.io,resources=hosts/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=create;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterrolebindings,verbs=create;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=edgefleet-site
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete

// SetupWithManager registers the reconciler. The index package's indexes must be set up first.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("site").
		For(&fleetv1.Site{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, deletionPredicate()))).
		// Hosts created, deleted or changed in spec change the site's counts and cluster; of their
		// status only Ready matters (a host that is not Ready is not pushed).
		Watches(&fleetv1.Host{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			h := o.(*fleetv1.Host)
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: h.Namespace, Name: h.Spec.SiteRef.Name}}}
		}), builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, hostReadyChanged()))).
		// Kubeconfig Secrets rebuild the site's client; BMC Secrets are copied to the site.
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.sitesOfSecret)).
		// Releases are immutable: a site waits only for its release to be created.
		Watches(&fleetv1.Release{}, handler.EnqueueRequestsFromMapFunc(r.sitesOfRelease), builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(event.UpdateEvent) bool { return false },
		})).
		WithOptions(opts).
		Complete(r)
}

// Reconcile brings one Site's status up to date.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	site := &fleetv1.Site{}
	if err := r.Client.Get(ctx, req.NamespacedName, site); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get site %s: %w", req.NamespacedName, err)
	}
	if !site.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, site)
	}
	if !controllerutil.ContainsFinalizer(site, fleetv1.SiteFinalizer) {
		patch := client.MergeFrom(site.DeepCopy())
		controllerutil.AddFinalizer(site, fleetv1.SiteFinalizer)
		if err := r.Client.Patch(ctx, site, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer to site %s: %w", req.NamespacedName, err)
		}
	}

	before := site.DeepCopy()
	s := &scope{site: site, key: req.NamespacedName, now: r.Clock.Now()}
	defer func() {
		if reterr == nil && r.deferStatus(s) {
			return
		}
		if err := r.patchStatus(ctx, before, site, reterr == nil && !s.dirty); err != nil {
			reterr = errors.Join(reterr, err)
		}
	}()

	phases := []func(context.Context, *scope) error{
		r.reconcileKubeconfig,
		r.reconcileReachability,
		r.reconcileHosts,
		r.reconcileArtifactAccess,
		r.reconcileOperationIntake,
		r.reconcileClusterPush,
		r.reconcileClusterStatus,
		r.reconcileOperationStatus,
		r.reconcileReady,
	}
	for _, phase := range phases {
		if err := phase(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: s.requeueAfter}, nil
}

// scope carries one reconcile's state between phases.
type scope struct {
	site *fleetv1.Site
	key  types.NamespacedName
	now  time.Time
	// connected is set when the site has a client for its current kubeconfig.
	connected bool
	// rebuilt is set when that client was built in this reconcile.
	rebuilt bool
	// heartbeat is set when the site was probed because its probe interval had passed: what
	// was pushed is checked against the site then.
	heartbeat bool
	// requeueAfter is when the site is due for its next probe.
	requeueAfter time.Duration
	// hosts are the site's Hosts.
	hosts []fleetv1.Host
	// clusterRead is set when the site's ApplicationCluster was read in this reconcile; cluster
	// is what was read (after this reconcile's write), nil when there is none.
	clusterRead bool
	cluster     *sitev1.ApplicationCluster
	// clusterRemoved is set when this reconcile finished removing what was pushed.
	clusterRemoved bool
	// carried is set when this reconcile's push carried the operation to the site (raised the
	// ApplicationCluster's operation generation for it).
	carried bool
	// dirty is set when a step failed without an error to return (a push the site refused):
	// the reconcile is not clean.
	dirty bool
}

// deferStatus reports whether this reconcile's status is left for the next one: the reconcile
// that carries an operation to the site writes neither status nor events, and the operation
// poll that follows writes them once, with the site's answer when it came in the meantime (a
// campaign's site then costs one status write, not two). Nothing is lost: the carry is recorded
// on the ApplicationCluster (OperationAnnotation), and a verdict or an operation poll switched
// off is written at once.
func (r *Reconciler) deferStatus(s *scope) bool {
	last := s.site.Status.LastOperation
	return s.carried && r.OperationPollInterval > 0 && last != nil && !final(last.Phase)
}

// requeueBy makes the next reconcile come at the latest after d.
func (s *scope) requeueBy(d time.Duration) {
	if d <= 0 {
		d = time.Millisecond
	}
	if s.requeueAfter == 0 || d < s.requeueAfter {
		s.requeueAfter = d
	}
}

func (r *Reconciler) reconcileDelete(ctx context.Context, site *fleetv1.Site) error {
	key := client.ObjectKeyFromObject(site)
	r.forget(key)
	if !controllerutil.ContainsFinalizer(site, fleetv1.SiteFinalizer) {
		return nil
	}
	if err := r.removeArtifactAccess(ctx, site); err != nil {
		return err
	}
	patch := client.MergeFrom(site.DeepCopy())
	controllerutil.RemoveFinalizer(site, fleetv1.SiteFinalizer)
	if err := r.Client.Patch(ctx, site, patch); err != nil {
		return fmt.Errorf("remove finalizer from site %s: %w", key, err)
	}
	return nil
}

func (r *Reconciler) forget(key types.NamespacedName) {
	r.Sites.Forget(key)
	r.pushed.forget(key)
	r.inFlight.set(key, false)
	r.probes.forget(key)
	r.Metrics.forget(key)
}

// patchStatus writes the status if it changed (probe times only every StatusReportInterval)
// and emits an event for every condition change.
func (r *Reconciler) patchStatus(ctx context.Context, before, site *fleetv1.Site, clean bool) error {
	if clean {
		site.Status.ObservedGeneration = site.Generation
	}
	r.holdProbeTimes(before, site)
	conditions.RecordChanges(r.Recorder, site, before.Status.Conditions, site.Status.Conditions,
		fleetv1.SiteKubeconfigValidCondition, fleetv1.SiteReachableCondition, fleetv1.SiteReadyCondition,
		fleetv1.SiteClusterSyncedCondition, fleetv1.SiteClusterReadyCondition)
	if apiequality.Semantic.DeepEqual(before.Status, site.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, site, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("patch status of site %s: %w", client.ObjectKeyFromObject(site), err)
	}
	return nil
}

// sitesOfSecret maps a Secret to the Sites whose kubeconfig it holds and to the Sites of the
// Hosts whose BMC credentials it holds.
func (r *Reconciler) sitesOfSecret(ctx context.Context, o client.Object) []reconcile.Request {
	key := index.Key(o.GetNamespace(), o.GetName())
	sites := &fleetv1.SiteList{}
	if err := r.Client.List(ctx, sites, client.MatchingFields{index.SiteKubeconfigSecret: key}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list sites of secret", "secret", client.ObjectKeyFromObject(o))
		return nil
	}
	hosts := &fleetv1.HostList{}
	if err := r.Client.List(ctx, hosts, client.InNamespace(o.GetNamespace()), client.MatchingFields{index.HostBMCSecret: key}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list hosts of secret", "secret", client.ObjectKeyFromObject(o))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(sites.Items)+len(hosts.Items))
	for _, s := range sites.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&s)})
	}
	for _, h := range hosts.Items {
		site := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: h.Namespace, Name: h.Spec.SiteRef.Name}}
		if !slices.Contains(reqs, site) {
			reqs = append(reqs, site)
		}
	}
	return reqs
}

// sitesOfRelease maps a Release to the Sites whose spec.cluster names it.
func (r *Reconciler) sitesOfRelease(ctx context.Context, o client.Object) []reconcile.Request {
	sites := &fleetv1.SiteList{}
	if err := r.Client.List(ctx, sites, client.InNamespace(o.GetNamespace()), client.MatchingFields{index.SiteRelease: index.Key(o.GetNamespace(), o.GetName())}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list sites of release", "release", client.ObjectKeyFromObject(o))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(sites.Items))
	for _, s := range sites.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&s)})
	}
	return reqs
}

// hostReadyChanged lets through updates that change a Host's Ready status.
func hostReadyChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, cur := e.ObjectOld.(*fleetv1.Host), e.ObjectNew.(*fleetv1.Host)
		return meta.IsStatusConditionTrue(old.Status.Conditions, fleetv1.HostReadyCondition) !=
			meta.IsStatusConditionTrue(cur.Status.Conditions, fleetv1.HostReadyCondition)
	}}
}

// deletionPredicate lets through updates that start a deletion, which change no generation.
func deletionPredicate() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
}
