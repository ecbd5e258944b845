package release

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/global-controller/index"
	"github.com/edgefleet/edgefleet/pkg/artifacts"
	"github.com/edgefleet/edgefleet/pkg/conditions"
	"github.com/edgefleet/edgefleet/pkg/packages"
)

// Artifacts is what the artifact store holds.
type Artifacts interface {
	// KindsOf lists the kinds of the artifacts whose content has this sha256: none when the
	// store does not hold it.
	KindsOf(ctx context.Context, sha256 string) ([]restv1.ArtifactKind, error)
	// Manifest reads the manifest of the binary package with this sha256; nil, and no error,
	// when the store does not hold it; an *artifacts.ValidationError when the content is no
	// valid package.
	Manifest(ctx context.Context, sha256 string) (*packages.Manifest, error)
}

// Reconciler reconciles Releases.
type Reconciler struct {
	// Client reads and writes Releases.
	Client client.Client
	// Artifacts is the artifact store; nil means there is none to check (the artifact API is
	// disabled), and every release is Ready with reason ArtifactsNotChecked.
	Artifacts Artifacts
	// Recorder emits an event on every condition change.
	Recorder events.EventRecorder
	// RecheckInterval is how often a release with missing artifacts, or artifacts of the
	// wrong kind, is checked again.
	RecheckInterval time.Duration
}

// ReasonArtifactsNotChecked means no artifact store is configured, so nothing was checked.
const ReasonArtifactsNotChecked = "ArtifactsNotChecked"

// +kubebuilder:rbac:groups=fleet.edgefleet.io,resources=releases,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.edgefleet.io,resources=releases/status,verbs=get;update;patch

// SetupWithManager registers the reconciler. The index package's indexes must be set up first.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("release").
		For(&fleetv1.Release{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(opts).
		Complete(r)
}

// Reconcile checks one Release's artifacts.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	rel := &fleetv1.Release{}
	if err := r.Client.Get(ctx, req.NamespacedName, rel); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !rel.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	before := rel.DeepCopy()
	defer func() {
		if err := r.patchStatus(ctx, before, rel, reterr == nil); err != nil {
			reterr = errors.Join(reterr, err)
		}
	}()
	final, err := r.reconcileArtifacts(ctx, rel)
	if err != nil || final {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.RecheckInterval}, nil
}

// reconcileArtifacts sets Ready from what the store holds of every digest of the release
// (Check), and reports whether it is final: not while artifacts are missing or stored as
// another kind (an upload can mend either); packages that conflict, or are invalid, never
// mend (fleetv1.ReleaseNeverReady): they are content, and the spec is immutable.
func (r *Reconciler) reconcileArtifacts(ctx context.Context, rel *fleetv1.Release) (bool, error) {
	if r.Artifacts == nil {
		conditions.Set(&rel.Status.Conditions, rel.Generation, fleetv1.ReleaseReadyCondition, metav1.ConditionTrue, ReasonArtifactsNotChecked,
			"no artifact store is configured (the artifact API is disabled): the digests were not checked")
		return true, nil
	}
	stored, err := r.stored(ctx, rel)
	if err != nil {
		return false, err
	}
	v := Check(&rel.Spec, stored)
	conditions.Set(&rel.Status.Conditions, rel.Generation, fleetv1.ReleaseReadyCondition, v.Status, v.Reason, v.Message)
	return v.Status == metav1.ConditionTrue || fleetv1.ReleaseNeverReady(v.Reason), nil
}

// stored reads what the store holds of each digest of the release and, once each is there as
// its field's kind (a release waiting for uploads reads no manifest), the manifest of each of
// its packages.
func (r *Reconciler) stored(ctx context.Context, rel *fleetv1.Release) (map[string]Stored, error) {
	stored := map[string]Stored{}
	for _, d := range index.ReleaseDigests(rel) {
		kinds, err := r.Artifacts.KindsOf(ctx, d)
		if err != nil {
			return nil, fmt.Errorf("check artifact sha256:%s of release %s: %w", d, client.ObjectKeyFromObject(rel), err)
		}
		stored[d] = Stored{Kinds: kinds}
	}
	if _, ok := checkKinds(&rel.Spec, stored); !ok {
		return stored, nil
	}
	for _, p := range rel.Spec.Packages {
		st := stored[p.SHA256]
		m, err := r.Artifacts.Manifest(ctx, p.SHA256)
		if invalid := (*artifacts.ValidationError)(nil); errors.As(err, &invalid) {
			st.Invalid = invalid.Message
			stored[p.SHA256] = st
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read the manifest of package sha256:%s of release %s: %w", p.SHA256, client.ObjectKeyFromObject(rel), err)
		}
		if m == nil {
			st.Kinds = nil // deleted since
		}
		st.Manifest = m
		stored[p.SHA256] = st
	}
	return stored, nil
}

func (r *Reconciler) patchStatus(ctx context.Context, before, rel *fleetv1.Release, clean bool) error {
	if clean {
		rel.Status.ObservedGeneration = rel.Generation
	}
	conditions.RecordChanges(r.Recorder, rel, before.Status.Conditions, rel.Status.Conditions, fleetv1.ReleaseReadyCondition)
	if apiequality.Semantic.DeepEqual(before.Status, rel.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, rel, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patch status of release %s: %w", client.ObjectKeyFromObject(rel), err)
	}
	return nil
}

// References answers the artifact store's question "what references this content?" with the
// Releases that name it, read from the API server itself: a cache could still miss a Release
// created just before the question, and its artifact would go. Deletes are rare; each lists
// the Releases a page at a time.
type References struct {
	// Reader reads Releases from the API server (a manager's APIReader), not from a cache.
	Reader client.Reader
}

// referencesPage is how many Releases one list call of ReferencesTo returns.
const referencesPage = 500

// ReferencesTo lists, as "Release/namespace/name", the Releases that name sha256.
func (r References) ReferencesTo(ctx context.Context, sha256 string) ([]string, error) {
	var out []string
	list := &fleetv1.ReleaseList{}
	for {
		if err := r.Reader.List(ctx, list, client.Limit(referencesPage), client.Continue(list.Continue)); err != nil {
			return nil, fmt.Errorf("list releases naming sha256:%s: %w", sha256, err)
		}
		for i := range list.Items {
			if slices.Contains(index.ReleaseDigests(&list.Items[i]), sha256) {
				out = append(out, "Release/"+list.Items[i].Namespace+"/"+list.Items[i].Name)
			}
		}
		if list.Continue == "" {
			return out, nil
		}
	}
}
