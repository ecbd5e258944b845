package campaign

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/campaign/plan"
)

// Dispatch stages, as the metrics name them.
const (
	stagePreCache = "PreCache"
	stageApply    = "Apply"
	stageRollback = "Rollback"
	// stageStep is a step of a site's move through intermediate releases before the apply.
	stageStep = "Step"
)

// job is one dispatch: the site at idx of scope.sites, and what to send it.
type job struct {
	idx   int
	stage string
}

// dispatch writes each job's operation to its site, DispatchConcurrency at a time, and reports
// which were written. A site changed since the cache saw it (conflict) or deleted is left for
// the next reconcile; other errors are returned together.
func (r *Reconciler) dispatch(ctx context.Context, s *scope, jobs []job) ([]bool, error) {
	done := make([]bool, len(jobs))
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, max(r.DispatchConcurrency, 1))
	var wg sync.WaitGroup
	for k, j := range jobs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			done[k], errs[k] = r.dispatchOne(ctx, s, j)
		}()
	}
	wg.Wait()
	counts := map[string]int{}
	for k, j := range jobs {
		if done[k] {
			counts[j.stage]++
		}
	}
	for stage, n := range counts {
		r.Metrics.observeDispatches(s.key, stage, n)
	}
	return done, errors.Join(errs...)
}

// dispatchOne writes the operation to one site in a single merge patch with the
// resourceVersion the cache saw as precondition: spec.operation, and for an apply or a rollback
// spec.cluster.release (clearing a version and image set by hand).
func (r *Reconciler) dispatchOne(ctx context.Context, s *scope, j job) (bool, error) {
	c, site, target := s.campaign, s.objs[j.idx], s.sites[j.idx]
	timeout := DefaultSiteTimeout
	if c.Spec.Strategy.SiteTimeout != nil {
		timeout = c.Spec.Strategy.SiteTimeout.Duration
	}
	pc := plan.Campaign{ID: string(c.UID)}
	base := site.DeepCopy()
	mod := site.DeepCopy()
	current := ""
	if mod.Spec.Cluster != nil {
		current = mod.Spec.Cluster.Release
	}
	deadline := metav1.NewTime(s.now.Add(timeout))
	op := &fleetv1.SiteOperation{
		Campaign:     c.Name,
		Action:       c.Spec.Action,
		Stage:        fleetv1.StageApply,
		Release:      c.Spec.Release,
		DispatchTime: metav1.NewTime(s.now),
		Deadline:     &deadline,
	}
	switch j.stage {
	case stagePreCache:
		op.ID, op.Stage, op.PreviousRelease = pc.PreCacheID(), fleetv1.StagePreCache, current
	case stageApply:
		op.ID, op.PreviousRelease = pc.ID, current
		setRelease(mod, c.Spec.Release)
	case stageStep:
		op.ID, op.Release, op.PreviousRelease, op.Target = pc.StepID(target.Step), target.Steps[0], current, c.Spec.Release
		setRelease(mod, target.Steps[0])
	case stageRollback:
		op.ID, op.Action, op.Release, op.PreviousRelease = pc.RollbackID(), fleetv1.ActionPatch, target.PreviousRelease, c.Spec.Release
		setRelease(mod, target.PreviousRelease)
	}
	mod.Spec.Operation = op
	err := r.Client.Patch(ctx, mod, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		r.Metrics.observeConflict()
		return false, nil
	case err != nil:
		return false, fmt.Errorf("dispatch %s %s to site %s/%s: %w", j.stage, op.ID, site.Namespace, site.Name, err)
	}
	r.pending.expect(c.UID, site.Name, op.ID, sentFor{action: c.Spec.Action, release: c.Spec.Release}, s.now)
	return true, nil
}

// sentFor is the campaign spec an operation was dispatched for: the campaign's action (empty
// when the operation does not tell, as a rollback, always a patch) and release.
type sentFor struct {
	action  fleetv1.OperationAction
	release string
}

// sentForOperation reads, from an operation on a site, the campaign spec it was dispatched
// for; ok is false when the operation is not one of the campaign's.
func sentForOperation(op *fleetv1.SiteOperation, pc plan.Campaign) (_ sentFor, ok bool) {
	switch {
	case op.ID == pc.ID, op.ID == pc.PreCacheID():
		return sentFor{action: op.Action, release: op.Release}, true
	case op.ID == pc.RollbackID():
		// A rollback goes to the site's previous release; the campaign's is the one it leaves.
		return sentFor{release: op.PreviousRelease}, true
	case pc.StepOf(op.ID) > 0:
		// A step goes to an intermediate release on the way to the campaign's.
		return sentFor{action: op.Action, release: op.Target}, true
	}
	return sentFor{}, false
}

func setRelease(site *fleetv1.Site, release string) {
	if site.Spec.Cluster == nil {
		return
	}
	site.Spec.Cluster.Release = release
	site.Spec.Cluster.KubernetesVersion = ""
	site.Spec.Cluster.OSImage = nil
}
