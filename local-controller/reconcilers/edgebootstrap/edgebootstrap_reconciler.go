package edgebootstrap

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/conditions"
)

// Reconciler reconciles EdgeBootstrapConfigs.
type Reconciler struct {
	// Client reads and writes the site cluster.
	Client client.Client
	// Bootstrapper gives first-boot data and joins hosts.
	Bootstrapper Bootstrapper
	// Recorder emits an event on every condition change.
	Recorder events.EventRecorder
	// JoinRetry is how long to wait before asking the Bootstrapper again whether a node joined.
	JoinRetry time.Duration
}

// +kubebuilder:rbac:groups=site.edgefleet.io,resources=edgebootstrapconfigs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=site.edgefleet.io,resources=edgebootstrapconfigs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler: a Machine brings back its config, a Cluster that
// appears, is paused or is unpaused the configs labelled with its name. Paused configs are
// reconciled too, only to report the Paused condition. The manager's scheme needs clusterv1
// and sitev1.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	log := mgr.GetLogger().WithName("edgebootstrapconfig")
	clusterToConfigs, err := util.ClusterToTypedObjectsMapper(mgr.GetClient(), &sitev1.EdgeBootstrapConfigList{}, mgr.GetScheme())
	if err != nil {
		return fmt.Errorf("map Clusters to EdgeBootstrapConfigs: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("edgebootstrapconfig").
		For(&sitev1.EdgeBootstrapConfig{}).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(machineToConfig)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(clusterToConfigs),
			builder.WithPredicates(predicates.Any(mgr.GetScheme(), log,
				predicates.ClusterCreateNotPaused(mgr.GetScheme(), log), predicates.ClusterPausedTransitions(mgr.GetScheme(), log)))).
		WithOptions(opts).
		Complete(r)
}

// machineToConfig maps a Machine to its EdgeBootstrapConfig.
func machineToConfig(_ context.Context, o client.Object) []reconcile.Request {
	m, ok := o.(*clusterv1.Machine)
	if !ok || m.Spec.Bootstrap.ConfigRef.Kind != "EdgeBootstrapConfig" || m.Spec.Bootstrap.ConfigRef.APIGroup != sitev1.GroupVersion.Group {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.Bootstrap.ConfigRef.Name}}}
}

// Reconcile gives the config's machine its first-boot data, then joins its host.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	cfg := &sitev1.EdgeBootstrapConfig{}
	if err := r.Client.Get(ctx, req.NamespacedName, cfg); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !cfg.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the data Secret goes with it (owner reference)
	}
	machine, err := util.GetOwnerMachine(ctx, r.Client, cfg.ObjectMeta)
	if err != nil || machine == nil {
		return ctrl.Result{}, err // the Machine sets itself as owner; its event brings us back
	}
	cluster, err := util.GetClusterFromMetadata(ctx, r.Client, machine.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("cluster of machine %s: %w", client.ObjectKeyFromObject(machine), err)
	}
	// The Paused condition (v1beta2 contract) is written at once when it changes; a change
	// brings the config back through its own update.
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, cfg); err != nil || isPaused || requeue {
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("set the Paused condition of EdgeBootstrapConfig %s: %w", req.NamespacedName, err)
		}
		return ctrl.Result{}, nil
	}
	before := cfg.DeepCopy()
	defer func() {
		if err := r.patchStatus(ctx, before, cfg); err != nil {
			reterr = errors.Join(reterr, err)
		}
	}()
	if err := r.reconcileData(ctx, cluster, machine, cfg); err != nil {
		return ctrl.Result{}, err
	}
	return r.reconcileJoin(ctx, cluster, machine, cfg)
}

func (r *Reconciler) patchStatus(ctx context.Context, before, cfg *sitev1.EdgeBootstrapConfig) error {
	conditions.RecordChanges(r.Recorder, cfg, before.Status.Conditions, cfg.Status.Conditions, "Ready")
	if apiequality.Semantic.DeepEqual(before.Status, cfg.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, cfg, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("patch status of EdgeBootstrapConfig %s: %w", client.ObjectKeyFromObject(cfg), err)
	}
	return nil
}
