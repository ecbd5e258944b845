package campaign

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"github.com/edgefleet/edgefleet/global-controller/index"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/campaign/plan"
	"github.com/edgefleet/edgefleet/pkg/conditions"
)

// Reconciler reconciles Campaigns.
type Reconciler struct {
	// Client reads Campaigns, Releases and Sites from the cache, and writes Campaigns and the
	// dispatches on Sites.
	Client client.Client
	// Recorder emits an event on every phase and condition change and every new wave.
	Recorder events.EventRecorder
	// Metrics are updated on every reconcile; nil disables them.
	Metrics *Metrics
	// Clock tells the time.
	Clock clock.PassiveClock
	// DispatchConcurrency bounds the Site patches in flight at once.
	DispatchConcurrency int
	// MaxDispatchesPerReconcile bounds the patches one reconcile writes; the rest go in the
	// next reconcile, right after, so that the sites' answers are taken in while a big wave goes
	// out. 0 means DispatchConcurrency × 8.
	MaxDispatchesPerReconcile int
	// ResyncInterval is how often an unfinished campaign is looked at without any event (a
	// site freed by another campaign, a maintenance window opening are caught by then at the
	// latest).
	ResyncInterval time.Duration

	once    sync.Once
	pending *expectations
}

// +kubebuilder:rbac:groups=fleet.edgefleet.io,resources=campaigns,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleet.edgefleet.io,resources=campaigns/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.edgefleet.io,resources=campaigns/finalizers,verbs=update
// +kubebuilder:rbac:groups=fleet.edgefleet.io,resources=sites,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=fleet.edgefleet.io,resources=releases,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler. The index package's indexes must be set up first.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	r.init()
	return ctrl.NewControllerManagedBy(mgr).
		Named("campaign").
		For(&fleetv1.Campaign{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, deletionPredicate()))).
		// A blocking campaign that changes phase releases the campaigns it blocks.
		Watches(&fleetv1.Campaign{}, handler.EnqueueRequestsFromMapFunc(r.blockedCampaigns), builder.WithPredicates(phaseChanged())).
		// A site's dispatch and report move its campaign on.
		Watches(&fleetv1.Site{}, handler.EnqueueRequestsFromMapFunc(campaignOfSite), builder.WithPredicates(siteOperationChanged())).
		// A release that becomes Ready starts the campaigns waiting for it.
		Watches(&fleetv1.Release{}, handler.EnqueueRequestsFromMapFunc(r.campaignsOfRelease)).
		WithOptions(opts).
		Complete(r)
}

func (r *Reconciler) init() {
	r.once.Do(func() { r.pending = newExpectations() })
}

// Reconcile moves one Campaign on.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	r.init()
	c := &fleetv1.Campaign{}
	if err := r.Client.Get(ctx, req.NamespacedName, c); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get campaign %s: %w", req.NamespacedName, err)
	}
	if !c.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, c)
	}
	if !controllerutil.ContainsFinalizer(c, fleetv1.CampaignFinalizer) {
		patch := client.MergeFrom(c.DeepCopy())
		controllerutil.AddFinalizer(c, fleetv1.CampaignFinalizer)
		if err := r.Client.Patch(ctx, c, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer to campaign %s: %w", req.NamespacedName, err)
		}
	}
	if c.Status.Phase.Final() {
		return ctrl.Result{}, nil
	}

	before := c.DeepCopy()
	s := &scope{campaign: c, key: req.NamespacedName, now: r.Clock.Now()}
	defer func() {
		if err := r.patchStatus(ctx, before, s, reterr == nil && !s.dirty); err != nil {
			reterr = errors.Join(reterr, err)
		}
	}()

	phases := []func(context.Context, *scope) error{
		r.reconcileDispatched,
		r.reconcileAbortBeforeStart,
		r.reconcileBlockers,
		r.reconcileRelease,
		r.reconcileTargets,
		r.reconcileDryRun,
		r.reconcileDispatch,
		r.reconcileStatus,
	}
	for _, phase := range phases {
		if err := phase(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		if s.halt {
			break
		}
	}
	return ctrl.Result{RequeueAfter: s.requeueAfter(r.ResyncInterval)}, nil
}

// scope carries one reconcile's state between phases.
type scope struct {
	campaign *fleetv1.Campaign
	key      types.NamespacedName
	now      time.Time
	// halt stops the phases after the current one (waiting for a blocker or the release, or
	// ended before any rollout decision).
	halt bool
	// dirty is set when something failed without an error to return (a dispatch refused by
	// a conflict): the reconcile is not clean and is retried soon.
	dirty bool
	// all are the Sites of the campaign's namespace, straight from the cache: never modify them.
	all []fleetv1.Site
	// dispatched counts the sites that carry one of the campaign's operations (or were just
	// dispatched one by this controller): the campaign has started when it is not 0.
	dispatched int
	// sites are the target Sites in dispatch order, classified; objs the Site objects (nil
	// for a named site that does not exist), straight from the cache: never modify them.
	sites []plan.Site
	objs  []*fleetv1.Site
	// limits of the strategy for the targets that are not skipped.
	limits plan.Limits
	// decision of this reconcile, after its dispatches.
	decision plan.Decision
	// heldUntil is when a site held by a maintenance window may go (zero: none held).
	heldUntil time.Time
	// campaignClosed is set while the campaign's own maintenance windows are closed.
	campaignClosed bool
	// recheck is the earliest time a site's state changes by itself (deadline, soak end).
	recheck time.Time
	// more is set when dispatches were left for the next reconcile.
	more bool
}

// requeueAfter is the delay until the campaign must be looked at again.
func (s *scope) requeueAfter(resync time.Duration) time.Duration {
	if s.more {
		return time.Millisecond
	}
	if s.dirty {
		return 100 * time.Millisecond
	}
	if s.campaign.Status.Phase.Final() {
		return 0
	}
	after := resync
	for _, t := range []time.Time{s.recheck, s.heldUntil} {
		if !t.IsZero() {
			after = min(after, max(t.Sub(s.now), 0)+10*time.Millisecond)
		}
	}
	return after
}

func (r *Reconciler) reconcileDelete(ctx context.Context, c *fleetv1.Campaign) error {
	key := client.ObjectKeyFromObject(c)
	r.Metrics.forget(key)
	r.pending.forget(c.UID)
	if !controllerutil.ContainsFinalizer(c, fleetv1.CampaignFinalizer) {
		return nil
	}
	patch := client.MergeFrom(c.DeepCopy())
	controllerutil.RemoveFinalizer(c, fleetv1.CampaignFinalizer)
	if err := r.Client.Patch(ctx, c, patch); err != nil {
		return fmt.Errorf("remove finalizer from campaign %s: %w", key, err)
	}
	return nil
}

// patchStatus writes the status if it changed, with an event for every phase and condition
// change and every new wave.
func (r *Reconciler) patchStatus(ctx context.Context, before *fleetv1.Campaign, s *scope, clean bool) error {
	c := s.campaign
	if clean {
		c.Status.ObservedGeneration = c.Generation
	}
	if old, cur := before.Status.Phase, c.Status.Phase; old != cur {
		kind := corev1.EventTypeNormal
		if cur == fleetv1.CampaignFailed || cur == fleetv1.CampaignPartiallySucceeded || cur == fleetv1.CampaignAborting || cur == fleetv1.CampaignAborted {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(c, nil, kind, string(cur), "SetPhase", "phase %s → %s (%s)", orNone(old), cur, c.Status.Progress)
	}
	if c.Status.CurrentWave > before.Status.CurrentWave || (c.Status.CurrentWave == 0 && before.Status.StartTime == nil && c.Status.StartTime != nil) {
		if w := s.decision; c.Status.CurrentWave < int32(len(w.Waves)) && c.Status.CurrentWave >= 0 {
			wave := w.Waves[c.Status.CurrentWave]
			r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, "WaveStarted", "Dispatch", "wave %d started: %d sites, window %d", c.Status.CurrentWave, wave.Size(), wave.Window)
		}
	}
	conditions.RecordChanges(r.Recorder, c, before.Status.Conditions, c.Status.Conditions,
		fleetv1.CampaignProgressingCondition, fleetv1.CampaignCompleteCondition)
	if apiequality.Semantic.DeepEqual(before.Status, c.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, c, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("patch status of campaign %s: %w", s.key, err)
	}
	return nil
}

func orNone(p fleetv1.CampaignPhase) string {
	if p == "" {
		return "(none)"
	}
	return string(p)
}

// blockedCampaigns maps a Campaign to the campaigns whose spec.blockedBy names it.
func (r *Reconciler) blockedCampaigns(ctx context.Context, o client.Object) []reconcile.Request {
	list := &fleetv1.CampaignList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{index.CampaignBlockedBy: index.Key(o.GetNamespace(), o.GetName())}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list campaigns blocked by campaign", "campaign", client.ObjectKeyFromObject(o))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, c := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&c)})
	}
	return reqs
}

// campaignsOfRelease maps a Release to the unstarted campaigns of its namespace that roll it out.
func (r *Reconciler) campaignsOfRelease(ctx context.Context, o client.Object) []reconcile.Request {
	list := &fleetv1.CampaignList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list campaigns of release", "release", client.ObjectKeyFromObject(o))
		return nil
	}
	var reqs []reconcile.Request
	for _, c := range list.Items {
		if c.Spec.Release == o.GetName() && c.Status.StartTime == nil {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&c)})
		}
	}
	return reqs
}

// campaignOfSite maps a Site to the campaign that last dispatched to it.
func campaignOfSite(_ context.Context, o client.Object) []reconcile.Request {
	site := o.(*fleetv1.Site)
	if site.Spec.Operation == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: site.Namespace, Name: site.Spec.Operation.Campaign}}}
}

// siteOperationChanged lets through Site updates that change the dispatch or its report.
func siteOperationChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, cur := e.ObjectOld.(*fleetv1.Site), e.ObjectNew.(*fleetv1.Site)
			return !apiequality.Semantic.DeepEqual(old.Spec.Operation, cur.Spec.Operation) ||
				!apiequality.Semantic.DeepEqual(old.Status.LastOperation, cur.Status.LastOperation)
		},
	}
}

// phaseChanged lets through Campaign updates that change the phase.
func phaseChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.(*fleetv1.Campaign).Status.Phase != e.ObjectNew.(*fleetv1.Campaign).Status.Phase
		},
	}
}

// deletionPredicate lets through updates that start a deletion, which change no generation.
func deletionPredicate() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
}
