package meshpolicy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"google.golang.org/protobuf/proto"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Reconciler keeps one Component's PeerAuthentication and AuthorizationPolicy as the builders
// make them: it creates them when missing and patches them back when edited; a deleted one is
// created again. Other labels and annotations on them are left alone.
type Reconciler struct {
	// Client writes the policies.
	Client client.Client
	// APIReader reads them from the API server (there are two objects, read on changes only).
	APIReader client.Reader
	// Component is what the policies are for.
	Component Component
	// Timeout bounds each reconcile, all its requests together.
	Timeout time.Duration
}

// SetupWithManager registers the reconciler, watching the two policies through a cache of
// their own that holds only them (so it needs no access outside the Component's namespace).
// The manager's scheme must know security.istio.io/v1 (securityv1.AddToScheme) and the API
// server must serve it (Installed).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	switch {
	case r.Client == nil || r.APIReader == nil:
		return errors.New("mesh policy reconciler: Client and APIReader are required")
	case r.Timeout <= 0:
		return fmt.Errorf("mesh policy reconciler: Timeout must be positive, got %s", r.Timeout)
	}
	if err := r.Component.Validate(); err != nil {
		return err
	}
	key := types.NamespacedName{Namespace: r.Component.Namespace, Name: r.Component.Name}
	policies, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		DefaultNamespaces:    map[string]cache.Config{key.Namespace: {}},
		DefaultFieldSelector: fields.OneTermEqualSelector("metadata.name", key.Name),
	})
	if err != nil {
		return fmt.Errorf("cache of mesh policies %s: %w", key, err)
	}
	if err := mgr.Add(policies); err != nil {
		return fmt.Errorf("add cache of mesh policies %s: %w", key, err)
	}
	toKey := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: key}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("meshpolicy").
		WatchesRawSource(source.Kind(policies, client.Object(&securityv1.PeerAuthentication{}), toKey)).
		WatchesRawSource(source.Kind(policies, client.Object(&securityv1.AuthorizationPolicy{}), toKey)).
		// Neither object may exist yet: reconcile once at start to create them.
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			q.Add(reconcile.Request{NamespacedName: key})
			return nil
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1, ReconciliationTimeout: r.Timeout}).
		Complete(r)
}

// Reconcile makes both policies of the Component as they should be.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	return ctrl.Result{}, errors.Join(
		r.ensure(ctx, PeerAuthentication(r.Component), &securityv1.PeerAuthentication{}),
		r.ensure(ctx, AuthorizationPolicy(r.Component), &securityv1.AuthorizationPolicy{}),
	)
}

// ensure creates want, or patches got (read into) back to want's spec and labels.
func (r *Reconciler) ensure(ctx context.Context, want, got client.Object) error {
	kind, wantSpec := parts(want)
	_, gotSpec := parts(got)
	key := client.ObjectKeyFromObject(want)
	err := r.APIReader.Get(ctx, key, got)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, want); err != nil {
			return fmt.Errorf("create %s %s: %w", kind, key, err)
		}
		ctrl.LoggerFrom(ctx).Info("created mesh policy", "kind", kind, "policy", key)
		return nil
	case err != nil:
		return fmt.Errorf("get %s %s: %w", kind, key, err)
	}
	labels := got.GetLabels()
	if proto.Equal(gotSpec, wantSpec) && labels[ManagedByLabel] == want.GetLabels()[ManagedByLabel] {
		return nil
	}
	before := got.DeepCopyObject().(client.Object)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, want.GetLabels())
	got.SetLabels(labels)
	proto.Reset(gotSpec)
	proto.Merge(gotSpec, wantSpec)
	if err := r.Client.Patch(ctx, got, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("repair %s %s: %w", kind, key, err)
	}
	ctrl.LoggerFrom(ctx).Info("repaired mesh policy edited by hand", "kind", kind, "policy", key)
	return nil
}

// parts are a policy's kind and the proto message of its spec.
func parts(o client.Object) (string, proto.Message) {
	switch o := o.(type) {
	case *securityv1.PeerAuthentication:
		return "PeerAuthentication", &o.Spec
	case *securityv1.AuthorizationPolicy:
		return "AuthorizationPolicy", &o.Spec
	}
	panic(fmt.Sprintf("meshpolicy: %T is not a mesh policy", o))
}
