package edgecluster

import (
	"context"
	"errors"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/conditions"
)

// Reconciler reports an EdgeCluster provisioned once its owner Cluster is set and its
// control-plane endpoint is known.
type Reconciler struct {
	// Client reads EdgeClusters and Clusters and writes EdgeCluster status.
	Client client.Client
	// Recorder emits an event on every change of the Ready condition.
	Recorder events.EventRecorder
}

// +kubebuilder:rbac:groups=site.edgefleet.io,resources=edgeclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=site.edgefleet.io,resources=edgeclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler. The manager's scheme must know the site kinds and
// Cluster-API's core kinds (clusterv1). Paused EdgeClusters are reconciled too: only to report
// the Paused condition.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	log := mgr.GetLogger().WithName("edgecluster")
	return ctrl.NewControllerManagedBy(mgr).
		Named("edgecluster").
		For(&sitev1.EdgeCluster{}).
		// A Cluster that appears, is paused or is unpaused brings its EdgeCluster back.
		Watches(&clusterv1.Cluster{},
			handler.EnqueueRequestsFromMapFunc(util.ClusterToInfrastructureMapFunc(ctx,
				sitev1.GroupVersion.WithKind("EdgeCluster"), mgr.GetClient(), &sitev1.EdgeCluster{})),
			builder.WithPredicates(predicates.Any(mgr.GetScheme(), log,
				predicates.ClusterCreateNotPaused(mgr.GetScheme(), log), predicates.ClusterPausedTransitions(mgr.GetScheme(), log)))).
		WithOptions(opts).
		Complete(r)
}

// Reconcile brings one EdgeCluster's status up to date.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	ec := &sitev1.EdgeCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, ec); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get EdgeCluster %s: %w", req.NamespacedName, err)
	}
	if !ec.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // bare metal has no cluster-wide infrastructure to take down
	}
	cluster, why, err := r.ownerCluster(ctx, ec)
	if err != nil {
		return ctrl.Result{}, err
	}
	// The Paused condition (v1beta2 contract) is written at once when it changes; a change
	// brings the EdgeCluster back through its own update.
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, ec); err != nil || isPaused || requeue {
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("set the Paused condition of EdgeCluster %s: %w", req.NamespacedName, err)
		}
		return ctrl.Result{}, nil
	}

	before := ec.DeepCopy()
	defer func() {
		if err := r.patchStatus(ctx, before, ec); err != nil {
			reterr = errors.Join(reterr, err)
		}
	}()
	if cluster == nil {
		conditions.Set(&ec.Status.Conditions, ec.Generation, sitev1.EdgeClusterReadyCondition, metav1.ConditionFalse,
			sitev1.ReasonWaitingForOwner, why)
		return ctrl.Result{}, nil // Cluster-API setting the owner reference updates the EdgeCluster
	}
	reconcileEndpoint(ec, cluster)
	return ctrl.Result{}, nil
}

// ownerCluster returns the Cluster that owns ec, or nil and a sentence saying why there is none
// yet.
func (r *Reconciler) ownerCluster(ctx context.Context, ec *sitev1.EdgeCluster) (*clusterv1.Cluster, string, error) {
	cluster, err := util.GetOwnerCluster(ctx, r.Client, ec.ObjectMeta)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Sprintf("the owner Cluster does not exist: %v", err), nil
	case err != nil:
		return nil, "", fmt.Errorf("get the owner Cluster of EdgeCluster %s: %w", client.ObjectKeyFromObject(ec), err)
	case cluster == nil:
		return nil, "waiting for Cluster-API to set the owner Cluster", nil
	}
	return cluster, "", nil
}

func (r *Reconciler) patchStatus(ctx context.Context, before, ec *sitev1.EdgeCluster) error {
	conditions.RecordChanges(r.Recorder, ec, before.Status.Conditions, ec.Status.Conditions, sitev1.EdgeClusterReadyCondition)
	if apiequality.Semantic.DeepEqual(before.Status, ec.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, ec, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("patch status of EdgeCluster %s: %w", client.ObjectKeyFromObject(ec), err)
	}
	return nil
}
