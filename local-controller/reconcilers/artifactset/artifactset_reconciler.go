package artifactset

import (
	"context"
	"errors"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/local-controller/sitecache"
	"github.com/edgefleet/edgefleet/pkg/conditions"
)

// IndexDigest indexes ArtifactSets by the sha256 of each artifact they list.
const IndexDigest = "spec.artifacts.sha256"

// Cache is what the reconciler needs of the site cache.
type Cache interface {
	Check(digest string) (sitecache.Entry, bool, error)
	Fetch(ctx context.Context, digest string, fetcher sitecache.Fetcher) (sitecache.Entry, error)
	Keep(keep map[string]bool) ([]string, error)
}

// FetcherSource gives the fetcher of the moment: it reads the site's credentials for the
// global artifact API on each call, so a rotated token takes effect at once. An error wrapping
// ErrNotConfigured means the credentials are missing or incomplete.
type FetcherSource func(ctx context.Context) (sitecache.Fetcher, error)

// ErrNotConfigured is wrapped by FetcherSource errors about missing credentials.
var ErrNotConfigured = errors.New("global artifact API not configured")

// Reconciler keeps the site cache holding every artifact of every ArtifactSet, and nothing else.
type Reconciler struct {
	// Client reads and writes ArtifactSets on the site cluster.
	Client client.Client
	// Cache is the site cache.
	Cache Cache
	// Fetchers gives the fetcher from the global artifact API.
	Fetchers FetcherSource
	// URLs are the site cache's URLs on the site network, signed (status URLs).
	URLs sitecache.URLs
	// Recorder emits an event on every condition change and on corrupted artifacts.
	Recorder events.EventRecorder
	// Metrics, when set, count fetched and corrupted artifacts.
	Metrics *Metrics

	corrupt chan event.TypedGenericEvent[string]
}

// +kubebuilder:rbac:groups=site.edgefleet.io,resources=artifactsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=site.edgefleet.io,resources=artifactsets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler and its digest index, and takes the cache's
// corruption reports (cache.OnCorrupt must call CorruptionFound).
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &sitev1.ArtifactSet{}, IndexDigest, func(o client.Object) []string {
		set := o.(*sitev1.ArtifactSet)
		out := make([]string, 0, len(set.Spec.Artifacts))
		for _, a := range set.Spec.Artifacts {
			out = append(out, a.SHA256)
		}
		return out
	}); err != nil {
		return fmt.Errorf("index ArtifactSets by %s: %w", IndexDigest, err)
	}
	r.corrupt = make(chan event.TypedGenericEvent[string], 64)
	return ctrl.NewControllerManagedBy(mgr).
		Named("artifactset").
		For(&sitev1.ArtifactSet{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// New or rotated credentials: try every set again.
		Watches(&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}},
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
				return r.requests(ctx)
			}),
			builder.OnlyMetadata,
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
				return o.GetName() == sitev1.GlobalAPISecretName && o.GetNamespace() == sitev1.HostsNamespace
			}))).
		// A cached file found corrupted: fetch it again for the sets that list it.
		WatchesRawSource(source.TypedChannel(r.corrupt, handler.TypedEnqueueRequestsFromMapFunc(
			func(ctx context.Context, digest string) []reconcile.Request {
				return r.requests(ctx, client.MatchingFields{IndexDigest: digest})
			}))).
		WithOptions(opts).
		Complete(r)
}

// CorruptionFound is told by the cache that the file of digest failed verification and was
// removed; the sets that list it are reconciled again, which fetches it again.
func (r *Reconciler) CorruptionFound(digest string) {
	r.Metrics.corrupted()
	select {
	case r.corrupt <- event.TypedGenericEvent[string]{Object: digest}:
	default: // a full queue already holds reconciles enough
	}
}

// Reconcile brings one ArtifactSet's artifacts into the cache and its status up to date, then
// removes from the cache what no set lists any more.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	set := &sitev1.ArtifactSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, set); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.collectGarbage(ctx) // a deleted set may leave artifacts unneeded
	}
	if !set.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	before := set.DeepCopy()
	defer func() {
		if err := r.patchStatus(ctx, before, set, reterr == nil); err != nil {
			reterr = errors.Join(reterr, err)
		}
	}()
	// checkpoint saves the status while the reconcile goes on (before a long transfer).
	checkpoint := func() error {
		if err := r.patchStatus(ctx, before, set, false); err != nil {
			return err
		}
		before = set.DeepCopy()
		return nil
	}
	if missing := r.reconcileCached(set); missing > 0 {
		if err := r.reconcileFetch(ctx, set, missing, checkpoint); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, r.collectGarbage(ctx)
}

func (r *Reconciler) patchStatus(ctx context.Context, before, set *sitev1.ArtifactSet, clean bool) error {
	if clean {
		set.Status.ObservedGeneration = set.Generation
	}
	conditions.RecordChanges(r.Recorder, set, before.Status.Conditions, set.Status.Conditions, sitev1.ArtifactSetReadyCondition)
	if apiequality.Semantic.DeepEqual(before.Status, set.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, set, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("patch status of ArtifactSet %s: %w", client.ObjectKeyFromObject(set), err)
	}
	return nil
}

func (r *Reconciler) requests(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	sets := &sitev1.ArtifactSetList{}
	if err := r.Client.List(ctx, sets, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list ArtifactSets to re-check")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(sets.Items))
	for i := range sets.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&sets.Items[i])})
	}
	return reqs
}
