package campaign

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/campaign/plan"
	"github.com/edgefleet/edgefleet/pkg/conditions"
)

// Bounds that keep the status small whatever the number of sites.
const (
	maxFailedSites = 50
	maxPlanNames   = 1000
	maxPlanSkipped = 100
	// maxPlanSteps sites' steps are listed in a dry run's plan, each of maxStepsListed
	// releases at most (the CRD's limits).
	maxPlanSteps   = 100
	maxStepsListed = 64
	maxReasonLen   = 256
)

// DefaultSiteTimeout bounds a site's operation when the strategy gives no siteTimeout.
const DefaultSiteTimeout = 2 * time.Hour

// reconcileDispatched lists the Sites of the campaign's namespace and reads, from the
// operations of the campaign they carry, what it dispatched. The API server refuses a change of
// action, release or targets once a campaign is created (dry runs aside, which dispatch
// nothing), but the sites' operations are what the campaign really sent, whatever its status
// says: a spec whose action, release or dryRun differs from them (a change made past the rule)
// ends the campaign Failed. Nothing more is dispatched, and the dispatched sites keep their
// operation: none is rolled back, since the operator's intent is unclear.
func (r *Reconciler) reconcileDispatched(ctx context.Context, s *scope) error {
	c := s.campaign
	list := &fleetv1.SiteList{}
	// The cache's objects themselves: read only, never modified.
	if err := r.Client.List(ctx, list, client.InNamespace(c.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list sites of campaign %s: %w", s.key, err)
	}
	s.all = list.Items
	pc := plan.Campaign{ID: string(c.UID)}
	// What this controller dispatched and the cache may not show yet: newer than the cache.
	pending := r.pending.sent(c.UID, s.now)
	var first, what, todo string
	check := func(name string, f sentFor) {
		s.dispatched++
		if first != "" && name > first {
			return
		}
		if w, t := differs(c, f, name); w != "" {
			first, what, todo = name, w, t
		}
	}
	for i := range list.Items {
		site := &list.Items[i]
		if _, ok := pending[site.Name]; ok || site.Spec.Operation == nil {
			continue
		}
		if f, ok := sentForOperation(site.Spec.Operation, pc); ok {
			check(site.Name, f)
		}
	}
	for name, f := range pending {
		check(name, f)
	}
	if what == "" {
		return nil
	}
	if c.Spec.DryRun {
		what = fmt.Sprintf("spec.dryRun is set but this campaign dispatched %d sites (first: %s)", s.dispatched, first)
	}
	s.finish(fleetv1.CampaignFailed, fleetv1.ReasonSpecChanged, fmt.Sprintf(
		"%s; action, release and targets cannot change once a campaign is created. Nothing more is dispatched; the %d sites dispatched keep their operation as it is (none is rolled back): %s",
		what, s.dispatched, todo))
	return nil
}

// differs says how the campaign's spec differs from what it sent site (empty: it does not),
// and what to do.
func differs(c *fleetv1.Campaign, f sentFor, site string) (what, todo string) {
	switch {
	case c.Spec.DryRun:
		return "spec.dryRun is set", "create a new Campaign with dryRun set to plan again"
	case f.release != c.Spec.Release:
		return fmt.Sprintf("spec.release is %q but this campaign dispatched release %q (to site %s)", c.Spec.Release, f.release, site),
			fmt.Sprintf("create a new Campaign to roll out %q", c.Spec.Release)
	case f.action != "" && f.action != c.Spec.Action:
		return fmt.Sprintf("spec.action is %q but this campaign dispatched action %q (to site %s)", c.Spec.Action, f.action, site),
			fmt.Sprintf("create a new Campaign to run %s", c.Spec.Action)
	}
	return "", ""
}

// reconcileAbortBeforeStart ends a campaign aborted before it dispatched any site (waiting for
// its release or a blocker, or a dry run): there is nothing in flight to wait for.
func (r *Reconciler) reconcileAbortBeforeStart(_ context.Context, s *scope) error {
	if s.campaign.Spec.Abort && !s.hasStarted() {
		s.finish(fleetv1.CampaignAborted, fleetv1.ReasonAbortRequested, "spec.abort is set and no site was dispatched: nothing was rolled out")
	}
	return nil
}

// reconcileBlockers holds a campaign that has not started until every campaign of
// spec.blockedBy has Succeeded. A dry run is planned whatever blocks it.
func (r *Reconciler) reconcileBlockers(ctx context.Context, s *scope) error {
	c := s.campaign
	if s.hasStarted() || c.Spec.DryRun {
		return nil
	}
	for _, name := range c.Spec.BlockedBy {
		b := &fleetv1.Campaign{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, b)
		switch {
		case apierrors.IsNotFound(err):
			s.wait(fleetv1.CampaignBlocked, fleetv1.ReasonBlocked, fmt.Sprintf("campaign %q of spec.blockedBy does not exist", name))
			return nil
		case err != nil:
			return fmt.Errorf("get campaign %s/%s blocking campaign %s: %w", c.Namespace, name, s.key, err)
		case b.Status.Phase.Final() && b.Status.Phase != fleetv1.CampaignSucceeded:
			s.wait(fleetv1.CampaignBlocked, fleetv1.ReasonBlocked, fmt.Sprintf("campaign %q of spec.blockedBy ended %s, not Succeeded: this campaign will not start; remove it from spec.blockedBy to start anyway", name, b.Status.Phase))
			return nil
		case b.Status.Phase != fleetv1.CampaignSucceeded:
			s.wait(fleetv1.CampaignBlocked, fleetv1.ReasonBlocked, fmt.Sprintf("campaign %q of spec.blockedBy is %s; this campaign starts once it has Succeeded", name, orNone(b.Status.Phase)))
			return nil
		}
	}
	return nil
}

// reconcileRelease holds a campaign that has not started until its release is Ready, and ends
// it Failed when the release never will be (fleetv1.ReleaseNeverReady): waiting would hold its
// sites, and the campaigns it blocks, for nothing.
func (r *Reconciler) reconcileRelease(ctx context.Context, s *scope) error {
	c := s.campaign
	if s.hasStarted() || c.Spec.DryRun {
		return nil
	}
	rel := &fleetv1.Release{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: c.Spec.Release}, rel)
	switch {
	case apierrors.IsNotFound(err):
		s.wait(fleetv1.CampaignPending, fleetv1.ReasonReleaseNotReady, fmt.Sprintf("Release %q (spec.release) does not exist in namespace %q", c.Spec.Release, c.Namespace))
		return nil
	case err != nil:
		return fmt.Errorf("get release %s of campaign %s: %w", c.Spec.Release, s.key, err)
	}
	msg, notReady := conditions.NotTrue(rel.Status.Conditions, fleetv1.ReleaseReadyCondition)
	ready := meta.FindStatusCondition(rel.Status.Conditions, fleetv1.ReleaseReadyCondition)
	switch {
	case !notReady:
	case ready != nil && ready.ObservedGeneration == rel.Generation && fleetv1.ReleaseNeverReady(ready.Reason):
		s.finish(fleetv1.CampaignFailed, fleetv1.ReasonReleaseInvalid, fmt.Sprintf("Release %q will never be Ready: %s; no site was dispatched: create a Release that fixes it and a campaign of that release", c.Spec.Release, msg))
	default:
		s.wait(fleetv1.CampaignPending, fleetv1.ReasonReleaseNotReady, fmt.Sprintf("Release %q: %s", c.Spec.Release, msg))
	}
	return nil
}

// reconcileTargets lists the target Sites from the cache, in dispatch order (spec.targets.names
// first, then the selector's matches by name, without the excluded ones), classifies each, and
// resolves the strategy against the ones not skipped.
func (r *Reconciler) reconcileTargets(ctx context.Context, s *scope) error {
	c := s.campaign
	byName := make(map[string]*fleetv1.Site, len(s.all))
	for i := range s.all {
		byName[s.all[i].Name] = &s.all[i]
	}
	excluded := make(map[string]bool, len(c.Spec.Targets.Exclude))
	for _, n := range c.Spec.Targets.Exclude {
		excluded[n] = true
	}
	taken := map[string]bool{}
	var order []string
	for _, n := range c.Spec.Targets.Names {
		if !excluded[n] && !taken[n] {
			taken[n] = true
			order = append(order, n)
		}
	}
	if c.Spec.Targets.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(c.Spec.Targets.Selector)
		if err != nil {
			s.invalid(fmt.Sprintf("spec.targets.selector: %v", err))
			return nil
		}
		var matched []string
		for i := range s.all {
			site := &s.all[i]
			if !excluded[site.Name] && !taken[site.Name] && sel.Matches(labels.Set(site.Labels)) {
				matched = append(matched, site.Name)
			}
		}
		slices.Sort(matched)
		order = append(order, matched...)
	}

	windows := plan.NewWindows()
	campaignOpen, campaignNext, err := windows.Open(c.Spec.Strategy.MaintenanceWindows, s.now)
	if err != nil {
		s.invalid(fmt.Sprintf("spec.strategy.maintenanceWindows: %v", err))
		return nil
	}
	s.campaignClosed = !campaignOpen
	pc := plan.Campaign{ID: string(c.UID), Release: c.Spec.Release}
	if pc.Versions, err = r.releaseVersions(ctx, c.Namespace); err != nil {
		return fmt.Errorf("campaign %s: %w", s.key, err)
	}
	if c.Spec.Strategy.Soak != nil {
		pc.Soak = c.Spec.Strategy.Soak.Duration
	}
	siteWindows := c.Spec.Action != fleetv1.ActionInstall
	s.sites = make([]plan.Site, len(order))
	s.objs = make([]*fleetv1.Site, len(order))
	eligible := 0
	for i, name := range order {
		obj := byName[name]
		s.objs[i] = obj
		if obj == nil {
			s.sites[i] = plan.Site{Name: name, State: plan.Skipped, Reason: plan.ReasonNotFound}
			continue
		}
		site, recheck := plan.Classify(obj, pc, s.now)
		s.recheck = earliest(s.recheck, recheck)
		seen := ""
		if obj.Spec.Operation != nil {
			seen = obj.Spec.Operation.ID
		}
		if id, ok := r.pending.pending(c.UID, name, seen, s.now); ok {
			// Dispatched by this controller, not in the cache yet.
			switch {
			case id == pc.ID, pc.StepOf(id) > 0:
				site.State, site.Steps = plan.InProgress, nil
			case id == pc.PreCacheID():
				site.State = plan.PreCaching
			case id == pc.RollbackID():
				site.Rollback = plan.RollingBack
			}
			site.Busy = false
		}
		var own []fleetv1.MaintenanceWindow
		if siteWindows {
			own = obj.Spec.MaintenanceWindows
		}
		s.heldUntil = earliest(s.heldUntil, windows.Gate(&site, campaignOpen, campaignNext, own, s.now))
		if site.State != plan.Skipped {
			eligible++
		}
		s.sites[i] = site
	}
	s.limits, err = plan.Resolve(c.Spec.Strategy, eligible)
	if err != nil {
		s.invalid(err.Error())
	}
	return nil
}

// releaseVersions maps each Release of namespace, from the cache, to its Kubernetes version,
// for the planner's version-skew checks.
func (r *Reconciler) releaseVersions(ctx context.Context, namespace string) (map[string]string, error) {
	list := &fleetv1.ReleaseList{}
	if err := r.Client.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list releases of namespace %s: %w", namespace, err)
	}
	versions := make(map[string]string, len(list.Items))
	for i := range list.Items {
		versions[list.Items[i].Name] = list.Items[i].Spec.KubernetesVersion
	}
	return versions, nil
}

// reconcileDryRun writes the wave plan of a dry run to status.plan and stops there.
func (r *Reconciler) reconcileDryRun(_ context.Context, s *scope) error {
	c := s.campaign
	if !c.Spec.DryRun {
		c.Status.Plan = nil
		return nil
	}
	s.decision = plan.Decide(plan.Input{Sites: s.sites, Limits: s.limits, Paused: true})
	d := s.decision
	p := &fleetv1.CampaignPlan{}
	names := 0
	for i, w := range d.Waves {
		wave := fleetv1.CampaignWave{Index: int32(i), Canary: w.Canary, Size: int32(w.Size()), Window: int32(w.Window)}
		for pos := w.Start; pos < w.End; pos++ {
			if names == maxPlanNames {
				p.Truncated = true
				break
			}
			wave.Sites = append(wave.Sites, s.sites[d.Eligible[pos]].Name)
			names++
		}
		p.Waves = append(p.Waves, wave)
	}
	for _, site := range s.sites {
		switch {
		case len(site.Steps) < 2 || site.State == plan.Skipped:
		case len(p.Steps) == maxPlanSteps || len(site.Steps) > maxStepsListed:
			p.Truncated = true
		default:
			p.Steps = append(p.Steps, fleetv1.CampaignSiteSteps{Name: site.Name, Releases: site.Steps})
		}
	}
	for _, site := range s.sites {
		if site.State != plan.Skipped {
			continue
		}
		if len(p.Skipped) == maxPlanSkipped {
			p.Truncated = true
			break
		}
		p.Skipped = append(p.Skipped, fleetv1.CampaignSiteResult{Name: site.Name, State: site.State.String(), Reason: truncate(site.Reason)})
	}
	c.Status.Plan = p
	s.fillCounts()
	s.wait(fleetv1.CampaignDryRun, fleetv1.ReasonDryRun, fmt.Sprintf("dry run: %d waves over %d sites (%d skipped) in status.plan; no site was touched. Clear spec.dryRun to run it",
		len(d.Waves), len(d.Eligible), d.Counts.Skipped))
	return nil
}

// reconcileDispatch decides what to dispatch now and writes it to the sites.
func (r *Reconciler) reconcileDispatch(ctx context.Context, s *scope) error {
	c := s.campaign
	in := plan.Input{
		Sites:        s.sites,
		Limits:       s.limits,
		PreCache:     c.Spec.Strategy.PreCache,
		PreCacheDone: c.Status.PreCacheCompletionTime != nil,
		Rollback:     c.Spec.Strategy.RollbackOnFailure,
		Paused:       c.Spec.Paused,
		Abort:        c.Spec.Abort,
		Stopped:      recordedStop(c),
	}
	d := plan.Decide(in)
	r.Metrics.observeReconcile(r.Clock.Since(s.now).Seconds())

	// Rollbacks first (they restore service), then in dispatch order; a site left out now
	// stays Pending and is picked again by the next decision.
	var jobs []job
	for _, i := range d.Rollback {
		jobs = append(jobs, job{idx: i, stage: stageRollback})
	}
	for _, i := range d.PreCache {
		jobs = append(jobs, job{idx: i, stage: stagePreCache})
	}
	for _, i := range d.Step {
		jobs = append(jobs, s.applyOrStep(i))
	}
	for _, i := range d.Apply {
		jobs = append(jobs, s.applyOrStep(i))
	}
	limit := r.MaxDispatchesPerReconcile
	if limit <= 0 {
		limit = max(r.DispatchConcurrency, 1) * 8
	}
	if len(jobs) > limit {
		jobs, s.more = jobs[:limit], true
	}
	done, err := r.dispatch(ctx, s, jobs)
	for k, j := range jobs {
		if !done[k] {
			s.dirty = true
			continue
		}
		switch j.stage {
		case stagePreCache:
			s.sites[j.idx].State = plan.PreCaching
		case stageApply, stageStep:
			s.sites[j.idx].State, s.sites[j.idx].Steps = plan.InProgress, nil
		case stageRollback:
			s.sites[j.idx].Rollback = plan.RollingBack
		}
	}
	// Counts, waves and the verdict after this reconcile's dispatches; the stop stays the one
	// decided before them.
	in.Sites, in.Stopped = s.sites, d.Stop
	s.decision = plan.Decide(in)
	s.decision.HeldByWindows, s.decision.HeldByBusy = d.HeldByWindows, d.HeldByBusy
	s.decision.PreCacheDone = d.PreCacheDone
	if c.Status.StartTime == nil && s.started() {
		c.Status.StartTime = &metav1.Time{Time: s.now}
	}
	return err
}

// applyOrStep is the dispatch that moves site i on: the apply of the campaign's release, or,
// for a site that moves through intermediate releases, its next step until the last.
func (s *scope) applyOrStep(i int) job {
	if steps := s.sites[i].Steps; len(steps) > 1 {
		return job{idx: i, stage: stageStep}
	}
	return job{idx: i, stage: stageApply}
}

// reconcileStatus writes the counts, the phase and the conditions.
func (r *Reconciler) reconcileStatus(_ context.Context, s *scope) error {
	c, d := s.campaign, s.decision
	s.fillCounts()
	c.Status.CurrentWave = int32(max(d.CurrentWave, 0))
	c.Status.Waves = int32(len(d.Waves))
	c.Status.Window = int32(d.Window)
	for w := int(c.Status.FinishedWaves); w < d.FinishedWaves && w < len(d.Waves); w++ {
		if took, ok := s.waveDuration(d.Waves[w]); ok {
			r.Metrics.observeWave(took.Seconds())
		}
	}
	c.Status.FinishedWaves = int32(d.FinishedWaves)
	if c.Spec.Strategy.PreCache && d.PreCacheDone && c.Status.PreCacheCompletionTime == nil {
		c.Status.PreCacheCompletionTime = &metav1.Time{Time: s.now}
	}
	c.Status.FailedSites = nil
	for _, site := range s.sites {
		if !site.State.Final() || site.State == plan.Succeeded || site.UpToDate {
			continue
		}
		if len(c.Status.FailedSites) == maxFailedSites {
			break
		}
		reason := site.Reason
		if c.Spec.Strategy.RollbackOnFailure && site.NoRollback != "" {
			reason += "; " + site.NoRollback
		}
		c.Status.FailedSites = append(c.Status.FailedSites, fleetv1.CampaignSiteResult{Name: site.Name, State: site.State.String(), Reason: truncate(reason)})
	}
	r.Metrics.observeCounts(s.key, d.Counts)

	counts := countsMessage(d.Counts)
	failed := d.Counts.Failed + d.Counts.TimedOut
	gen := c.Generation
	progressing := func(status metav1.ConditionStatus, reason, msg string) {
		conditions.Set(&c.Status.Conditions, gen, fleetv1.CampaignProgressingCondition, status, reason, msg)
	}
	complete := func(status metav1.ConditionStatus, reason, msg string) {
		conditions.Set(&c.Status.Conditions, gen, fleetv1.CampaignCompleteCondition, status, reason, msg)
	}
	stopReason, stopMsg := stopCondition(d.Stop, failed, d.Counts.Succeeded+failed, s.limits)
	// working counts the sites whose operation runs; the others in flight are between steps.
	working, betweenSteps := d.Counts.InProgress-d.Counts.BetweenSteps, ""
	if d.Counts.BetweenSteps > 0 {
		betweenSteps = fmt.Sprintf(" (%d between steps)", d.Counts.BetweenSteps)
	}
	c.Status.Phase = d.Phase(c.Spec.Paused)
	switch verdict := d.Verdict(); {
	case verdict == plan.AllSucceeded:
		progressing(metav1.ConditionFalse, fleetv1.ReasonCampaignSucceeded, "every target succeeded")
		complete(metav1.ConditionTrue, fleetv1.ReasonCampaignSucceeded, counts)
	case verdict == plan.PartlySucceeded:
		msg := fmt.Sprintf("not every target succeeded (%s): the failed, timed-out and skipped sites are in status.failedSites", budgetMessage(s.limits))
		progressing(metav1.ConditionFalse, fleetv1.ReasonSitesNotSucceeded, msg)
		complete(metav1.ConditionTrue, fleetv1.ReasonSitesNotSucceeded, counts)
	case verdict == plan.NoneSucceeded:
		msg := "no target succeeded: see status.failedSites"
		if d.Counts.Total() == 0 {
			msg = "spec.targets matched no Site: nothing was rolled out"
		}
		progressing(metav1.ConditionFalse, fleetv1.ReasonNoSiteSucceeded, msg)
		complete(metav1.ConditionTrue, fleetv1.ReasonNoSiteSucceeded, counts)
	case verdict == plan.StoppedEarly:
		progressing(metav1.ConditionFalse, stopReason, stopMsg)
		complete(metav1.ConditionTrue, stopReason, stopMsg+"; "+counts)
	case d.Stop != plan.NotStopped:
		msg := fmt.Sprintf("%s; waiting for %d sites in flight and %d rollbacks", stopMsg, working, d.Counts.RollingBack+len(d.Rollback))
		if d.Counts.BetweenSteps > 0 {
			msg += fmt.Sprintf("; %d sites between steps stay at the release of their last step", d.Counts.BetweenSteps)
		}
		progressing(metav1.ConditionFalse, stopReason, msg)
		complete(metav1.ConditionFalse, stopReason, counts)
	case c.Spec.Paused:
		progressing(metav1.ConditionFalse, fleetv1.ReasonPaused, fmt.Sprintf("spec.paused is set: nothing new is dispatched, %d sites in flight%s", d.Counts.InProgress, betweenSteps))
		complete(metav1.ConditionFalse, fleetv1.ReasonPaused, counts)
	case !d.PreCacheDone:
		progressing(metav1.ConditionTrue, fleetv1.ReasonPreCaching, fmt.Sprintf("%d sites pre-caching, %d not dispatched yet", d.Counts.PreCaching, d.Counts.Pending))
		complete(metav1.ConditionFalse, fleetv1.ReasonPreCaching, counts)
	default:
		reason, msg := fleetv1.ReasonRollingOut, fmt.Sprintf("wave %d of %d, %d sites in flight%s, window %d", c.Status.CurrentWave, len(d.Waves), d.Counts.InProgress, betweenSteps, d.Window)
		idle := working == 0 && len(d.Apply) == 0 && len(d.Step) == 0
		switch {
		case d.WaitingForCanaries:
			reason, msg = fleetv1.ReasonWaitingForCanaries, fmt.Sprintf("%d canaries running; the rest waits for all of them to succeed", d.Counts.InProgress)
		case d.HeldByWindows && idle:
			reason, msg = fleetv1.ReasonOutsideMaintenanceWindow, s.heldMessage()
		case d.HeldByBusy && idle:
			reason, msg = fleetv1.ReasonSitesBusy, s.busyMessage()
		}
		progressing(metav1.ConditionTrue, reason, msg)
		complete(metav1.ConditionFalse, reason, counts)
	}
	if c.Status.Phase.Final() && c.Status.CompletionTime == nil {
		c.Status.CompletionTime = &metav1.Time{Time: s.now}
	}
	return nil
}

// wait puts a campaign that has not started in a waiting phase and stops the reconcile there.
func (s *scope) wait(phase fleetv1.CampaignPhase, reason, msg string) {
	c := s.campaign
	c.Status.Phase = phase
	conditions.Set(&c.Status.Conditions, c.Generation, fleetv1.CampaignProgressingCondition, metav1.ConditionFalse, reason, msg)
	conditions.Set(&c.Status.Conditions, c.Generation, fleetv1.CampaignCompleteCondition, metav1.ConditionFalse, reason, "not started")
	s.halt = true
}

// invalid stops the reconcile on a spec that cannot be used; nothing is dispatched. A campaign
// that has not dispatched any site ends Failed (an invalid campaign is not left Pending as if
// it waited for its release). A started one keeps its phase and dispatches nothing new until
// the field is fixed: failing it would abandon the sites in flight and their rollbacks over a
// strategy edit.
func (s *scope) invalid(msg string) {
	if !s.hasStarted() {
		s.finish(fleetv1.CampaignFailed, fleetv1.ReasonInvalidSpec, msg+": no site was dispatched; delete the campaign and create it again with the field fixed")
		return
	}
	c := s.campaign
	conditions.Set(&c.Status.Conditions, c.Generation, fleetv1.CampaignProgressingCondition, metav1.ConditionFalse, fleetv1.ReasonInvalidSpec,
		msg+": nothing new is dispatched until the field is fixed; the sites in flight finish")
	s.halt = true
}

// finish ends the campaign in a final phase before any rollout decision (refused, or aborted
// before its first dispatch) and stops the reconcile.
func (s *scope) finish(phase fleetv1.CampaignPhase, reason, msg string) {
	c := s.campaign
	c.Status.Phase = phase
	conditions.Set(&c.Status.Conditions, c.Generation, fleetv1.CampaignProgressingCondition, metav1.ConditionFalse, reason, msg)
	conditions.Set(&c.Status.Conditions, c.Generation, fleetv1.CampaignCompleteCondition, metav1.ConditionTrue, reason, msg)
	if c.Status.CompletionTime == nil {
		c.Status.CompletionTime = &metav1.Time{Time: s.now}
	}
	s.halt = true
}

// hasStarted reports whether the campaign dispatched a site: one carries its operation, or its
// status recorded a start. The sites are trusted over the status, which anyone who may update
// campaigns/status can rewrite.
func (s *scope) hasStarted() bool {
	return s.dispatched > 0 || s.campaign.Status.StartTime != nil
}

// fillCounts writes the decision's counts to the status.
func (s *scope) fillCounts() {
	c, n := s.campaign, s.decision.Counts
	c.Status.Total = int32(len(s.sites))
	c.Status.Counts = fleetv1.CampaignCounts{
		Pending: int32(n.Pending), PreCaching: int32(n.PreCaching), InProgress: int32(n.InProgress),
		Succeeded: int32(n.Succeeded), Failed: int32(n.Failed), TimedOut: int32(n.TimedOut), Skipped: int32(n.Skipped),
		RollingBack: int32(n.RollingBack), RolledBack: int32(n.RolledBack),
	}
	c.Status.Failed = int32(n.Failed + n.TimedOut)
	c.Status.Progress = fmt.Sprintf("%d/%d", n.Done(), len(s.sites))
}

// heldMessage says which maintenance windows hold the sites left, and when the next opens.
func (s *scope) heldMessage() string {
	var msg string
	if s.campaignClosed {
		msg = "the campaign's spec.strategy.maintenanceWindows are closed"
	} else {
		held, first := 0, ""
		for _, site := range s.sites {
			if site.OutsideWindow {
				if held == 0 {
					first = site.Name
				}
				held++
			}
		}
		msg = fmt.Sprintf("sites waiting for their own spec.maintenanceWindows: %d (first: %s)", held, first)
	}
	if !s.heldUntil.IsZero() {
		msg += "; the next window opens at " + s.heldUntil.UTC().Format(time.RFC3339)
	}
	return msg
}

// busyMessage says which other operations hold the sites left.
func (s *scope) busyMessage() string {
	held, first := 0, ""
	for i, site := range s.sites {
		if !site.Busy {
			continue
		}
		if held == 0 {
			first = site.Name
			if op := s.objs[i].Spec.Operation; op != nil {
				first = fmt.Sprintf("%s runs operation %s of campaign %q", site.Name, op.ID, op.Campaign)
				if op.Deadline != nil {
					first += " until it finishes or its deadline " + op.Deadline.UTC().Format(time.RFC3339) + " passes"
				}
			}
		}
		held++
	}
	return fmt.Sprintf("sites held by another campaign's operation: %d (first: %s)", held, first)
}

// started reports whether any site was dispatched.
func (s *scope) started() bool {
	for _, site := range s.sites {
		if site.State != plan.Pending && site.State != plan.Skipped {
			return true
		}
	}
	return false
}

// waveDuration is the time from the first dispatch of the wave to the last completion.
func (s *scope) waveDuration(w plan.Wave) (time.Duration, bool) {
	var first, last time.Time
	for pos := w.Start; pos < w.End; pos++ {
		site := s.sites[s.decision.Eligible[pos]]
		if site.DispatchTime.IsZero() || site.CompletionTime.IsZero() {
			continue
		}
		if first.IsZero() || site.DispatchTime.Before(first) {
			first = site.DispatchTime
		}
		if site.CompletionTime.After(last) {
			last = site.CompletionTime
		}
	}
	return last.Sub(first), !first.IsZero()
}

// recordedStop is the stop a campaign recorded in its Progressing condition while Aborting.
func recordedStop(c *fleetv1.Campaign) plan.Stop {
	if c.Status.Phase != fleetv1.CampaignAborting {
		return plan.NotStopped
	}
	cond := meta.FindStatusCondition(c.Status.Conditions, fleetv1.CampaignProgressingCondition)
	if cond == nil {
		return plan.NotStopped
	}
	switch cond.Reason {
	case fleetv1.ReasonAbortRequested:
		return plan.Aborted
	case fleetv1.ReasonCanaryFailed:
		return plan.CanaryFailed
	case fleetv1.ReasonFailureBudgetExceeded:
		return plan.BudgetExceeded
	}
	return plan.NotStopped
}

// stopCondition is the reason and message of a stop.
func stopCondition(stop plan.Stop, failed, finished int, l plan.Limits) (string, string) {
	switch stop {
	case plan.Aborted:
		return fleetv1.ReasonAbortRequested, "spec.abort is set: nothing new is dispatched"
	case plan.CanaryFailed:
		return fleetv1.ReasonCanaryFailed, "a canary failed or timed out: nothing else is dispatched"
	case plan.BudgetExceeded:
		return fleetv1.ReasonFailureBudgetExceeded, fmt.Sprintf("%d of %d finished sites failed or timed out, over the %s: nothing new is dispatched", failed, finished, budgetMessage(l))
	}
	return "", ""
}

// budgetMessage names the failure budget, and says how to change a default one.
func budgetMessage(l plan.Limits) string {
	switch {
	case !l.Budget:
		return fmt.Sprintf("default failure budget of %d failed sites; set spec.strategy.failureBudget.maxFailures to tolerate more", plan.DefaultMaxFailures)
	case l.FailuresPercent:
		return fmt.Sprintf("failure budget of %d%% of finished sites", l.MaxFailuresPercent)
	}
	return fmt.Sprintf("failure budget of %d failed sites", l.MaxFailures)
}

// countsMessage gives the sites of a campaign by how they ended.
func countsMessage(n plan.Counts) string {
	msg := fmt.Sprintf("%d succeeded", n.Succeeded)
	if n.UpToDate > 0 {
		msg += fmt.Sprintf(", %d already at the release", n.UpToDate)
	}
	return msg + fmt.Sprintf(", %d failed, %d timed out, %d skipped of %d", n.Failed, n.TimedOut, n.Skipped-n.UpToDate, n.Total())
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func truncate(s string) string {
	if len(s) <= maxReasonLen {
		return s
	}
	return strings.ToValidUTF8(s[:maxReasonLen-3], "") + "..."
}
