package kmsaccount

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/bpa/clusterkms"
)

// Tokens forgets what it keeps of a cluster's plugin token (clusterkms.Source).
type Tokens interface {
	Forget(cluster types.NamespacedName)
}

// Reconciler deletes the plugin ServiceAccounts of ApplicationClusters that are gone. It runs
// for every such ServiceAccount the BPA's cache lists (so one left by a BPA stopped while its
// cluster was deleted goes at the next start) and when an ApplicationCluster is deleted.
type Reconciler struct {
	// Client reads the ServiceAccounts of clusterkms.Namespace (the manager's cache must hold
	// that namespace's ServiceAccounts only: the BPA has a Role there, nowhere else) and deletes
	// them.
	Client client.Client
	// APIReader reads ApplicationClusters from the API server: a cluster created a moment ago
	// may not be in the cache yet when its plugin's ServiceAccount is.
	APIReader client.Reader
	// Tokens forgets a deleted ServiceAccount's token.
	Tokens Tokens
}

// The plugins' ServiceAccounts (bpa/clusterkms), in their own namespace.
// +kubebuilder:rbac:groups="",namespace=edgefleet-kms,resources=serviceaccounts,verbs=get;list;watch;delete

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Client == nil || r.APIReader == nil || r.Tokens == nil {
		return errors.New("bpa-kmsaccount: Client, APIReader and Tokens are required")
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("bpa-kmsaccount").
		For(&corev1.ServiceAccount{}, builder.WithPredicates(predicate.NewPredicateFuncs(isPluginAccount), predicate.Funcs{
			// Its creation (or the cache's first list) is when a cluster may already be gone;
			// nothing the ServiceAccount's later changes say matters.
			UpdateFunc: func(event.UpdateEvent) bool { return false },
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		Watches(&sitev1.ApplicationCluster{}, handler.EnqueueRequestsFromMapFunc(accountOf), builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return false },
			UpdateFunc:  func(event.UpdateEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		WithOptions(opts).
		Complete(r)
}

// isPluginAccount is true for a ServiceAccount clusterkms made.
func isPluginAccount(o client.Object) bool {
	_, ok := clusterkms.ClusterOf(o)
	return ok && o.GetNamespace() == clusterkms.Namespace
}

// accountOf maps a deleted ApplicationCluster to its plugin's ServiceAccount.
func accountOf(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: clusterkms.Namespace, Name: clusterkms.ServiceAccountPrefix + o.GetName()}}}
}

// Reconcile deletes the ServiceAccount when the ApplicationCluster its labels name is gone.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sa := &corev1.ServiceAccount{}
	if err := r.Client.Get(ctx, req.NamespacedName, sa); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	key, ok := clusterkms.ClusterOf(sa)
	if !ok || !sa.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // not a plugin's, or going already
	}
	err := r.APIReader.Get(ctx, key, &sitev1.ApplicationCluster{})
	switch {
	case err == nil:
		return ctrl.Result{}, nil // the cluster is there: its plugin needs the account
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("ApplicationCluster %s of ServiceAccount %s: %w", key, req.NamespacedName, err)
	}
	// The UID precondition: a ServiceAccount made again since for a new cluster of the same
	// name is not deleted from this stale reading.
	if err := r.Client.Delete(ctx, sa, client.Preconditions{UID: &sa.UID}); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("delete ServiceAccount %s of the KMS plugin of deleted cluster %s: %w", req.NamespacedName, key, err)
	}
	r.Tokens.Forget(key)
	ctrl.LoggerFrom(ctx).Info("deleted the KMS plugin's ServiceAccount of a cluster that is gone: its tokens no longer log in to Vault", "applicationCluster", key)
	return ctrl.Result{}, nil
}
