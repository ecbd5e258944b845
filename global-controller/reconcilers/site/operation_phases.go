package site

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// Operations: a campaign dispatches work to a site by writing spec.operation (with
// spec.cluster.release). The site reconciler takes each operation in once (status.lastOperation
// gets its ID), carries it to the site, and reports its phase until a final one:
//
//   - stage PreCache: the site gets an ArtifactSet of the release's artifacts (named
//     preCacheSetName) and the operation is PreCached once the site cache holds them all;
//   - stage Apply: the push raises the ApplicationCluster's operationGeneration once for the
//     operation (the ApplicationCluster's OperationAnnotation names the operation that raised it,
//     so a reconcile that dies between the push and the status write raises it only once), and
//     the operation succeeds when the site has taken that generation in, runs the release's
//     Kubernetes version, reports the cluster Ready and, on a site whose BPA builds the cluster,
//     the BPA reports this generation installed; it fails when the site reports a host failed
//     or the BPA a failed package.
//
// A deadline that passes before a final phase times the operation out. Final phases stick.

// preCacheSetName is the name of the ArtifactSet that pre-caches a release at a site.
func preCacheSetName(site string) string { return site + "-precache" }

// final reports whether an operation phase is a verdict.
func final(p fleetv1.OperationPhase) bool {
	return p == fleetv1.OperationSucceeded || p == fleetv1.OperationFailed || p == fleetv1.OperationTimedOut
}

// reconcileOperationIntake takes in a new spec.operation: status.lastOperation starts over
// with its ID, Pending. It runs before the push, which carries the operation to the site.
func (r *Reconciler) reconcileOperationIntake(_ context.Context, s *scope) error {
	op := s.site.Spec.Operation
	if op == nil {
		return nil
	}
	if last := s.site.Status.LastOperation; last != nil && last.ID == op.ID {
		return nil
	}
	s.site.Status.LastOperation = &fleetv1.SiteOperationStatus{
		ID:        op.ID,
		Campaign:  op.Campaign,
		Action:    op.Action,
		Stage:     op.Stage,
		Release:   op.Release,
		Phase:     fleetv1.OperationPending,
		StartTime: &metav1.Time{Time: s.now},
		Message:   "taken in; not carried to the site yet",
	}
	return nil
}

// applying returns the operation the push carries to the ApplicationCluster, if any: an Apply
// operation that has no verdict yet.
func (s *scope) applying() *fleetv1.SiteOperation {
	op, last := s.site.Spec.Operation, s.site.Status.LastOperation
	if op == nil || op.Stage != fleetv1.StageApply || last == nil || last.ID != op.ID || final(last.Phase) {
		return nil
	}
	return op
}

// operationGeneration is the ApplicationCluster operation generation the push writes: one
// more than the site's for an operation not carried yet, the site's own otherwise.
func operationGeneration(op *fleetv1.SiteOperation, existing *sitev1.ApplicationCluster) int64 {
	if existing == nil {
		if op != nil {
			return 1
		}
		return 0
	}
	current := existing.Spec.OperationGeneration
	if op != nil && existing.Annotations[sitev1.OperationAnnotation] != op.ID {
		return current + 1
	}
	return current
}

// reconcileOperationStatus reports the phase of the operation in status.lastOperation. It runs
// after the push and the cluster status, and only while the operation has no verdict.
func (r *Reconciler) reconcileOperationStatus(ctx context.Context, s *scope) error {
	op, last := s.site.Spec.Operation, s.site.Status.LastOperation
	if op == nil || last == nil || last.ID != op.ID {
		r.inFlight.set(s.key, false)
		return nil
	}
	if final(last.Phase) {
		r.inFlight.set(s.key, false)
		return r.removePreCache(ctx, s)
	}
	phase, msg, err := r.operationPhase(ctx, s, op, last)
	if err != nil {
		return err
	}
	if !final(phase) && op.Deadline != nil && !s.now.Before(op.Deadline.Time) {
		phase, msg = fleetv1.OperationTimedOut, fmt.Sprintf("deadline %s passed (%s)", op.Deadline.UTC().Format("2006-01-02T15:04:05Z"), msg)
	}
	if len(msg) > 1024 {
		msg = msg[:1021] + "..."
	}
	changed := phase != last.Phase
	last.Phase, last.Message = phase, msg
	if changed && !r.deferStatus(s) {
		r.Recorder.Eventf(s.site, nil, eventType(phase), "Operation"+string(phase), "Operate",
			"operation %s (%s %s of release %s, campaign %s) is %s: %s", op.ID, op.Stage, op.Action, op.Release, op.Campaign, phase, msg)
	}
	if final(phase) {
		last.CompletionTime = &metav1.Time{Time: s.now}
	}
	if op.Deadline != nil && !final(phase) {
		s.requeueBy(op.Deadline.Sub(s.now))
	}
	r.inFlight.set(s.key, !final(phase))
	if !final(phase) && r.OperationPollInterval > 0 {
		s.requeueBy(r.pollInterval())
	}
	return nil
}

func eventType(p fleetv1.OperationPhase) string {
	if p == fleetv1.OperationFailed || p == fleetv1.OperationTimedOut {
		return "Warning"
	}
	return "Normal"
}

// operationPhase says where the operation stands, from what this reconcile saw of the site.
func (r *Reconciler) operationPhase(ctx context.Context, s *scope, op *fleetv1.SiteOperation, last *fleetv1.SiteOperationStatus) (fleetv1.OperationPhase, string, error) {
	if !s.siteAnswers() {
		return last.Phase, "the site is not reachable (see Reachable); waiting for it to come back", nil
	}
	if op.Stage == fleetv1.StagePreCache {
		return r.preCachePhase(ctx, s, op)
	}
	if s.site.Spec.Cluster == nil {
		return fleetv1.OperationFailed, "the site has no spec.cluster to apply the release to", nil
	}
	if s.site.Spec.Cluster.Release != op.Release {
		return fleetv1.OperationFailed, fmt.Sprintf("spec.cluster.release is %q, not the operation's release %q: changed since the dispatch", s.site.Spec.Cluster.Release, op.Release), nil
	}
	ac := s.cluster
	if ac == nil || ac.Annotations[sitev1.OperationAnnotation] != op.ID {
		synced := meta.FindStatusCondition(s.site.Status.Conditions, fleetv1.SiteClusterSyncedCondition)
		why := "the push has not carried it to the site yet"
		if synced != nil && synced.Status != metav1.ConditionTrue {
			why += " (ClusterSynced " + synced.Reason + ": " + synced.Message + ")"
		}
		return fleetv1.OperationPending, why, nil
	}
	last.OperationGeneration = ac.Spec.OperationGeneration
	st := ac.Status
	if st.ObservedOperationGeneration < ac.Spec.OperationGeneration || st.ObservedGeneration < ac.Generation {
		return fleetv1.OperationInProgress, fmt.Sprintf("waiting for the site to take in operation generation %d (it has taken in %d)",
			ac.Spec.OperationGeneration, st.ObservedOperationGeneration), nil
	}
	if hp := meta.FindStatusCondition(st.Conditions, sitev1.HostsProvisionedCondition); hp != nil && hp.Reason == sitev1.ReasonHostFailed {
		return fleetv1.OperationFailed, "the site reports " + hp.Message, nil
	}
	// A site whose BPA builds the cluster (it reports status.bootstrap) has run the release
	// only when the BPA has installed this generation's packages and charts: a patch leaves
	// the cluster Ready while it rolls through the nodes.
	b := st.Bootstrap
	bootstrapDone := b == nil || (b.ObservedGeneration >= ac.Generation && b.Phase == sitev1.BootstrapInstalled)
	if b != nil && b.ObservedGeneration >= ac.Generation && b.Phase == sitev1.BootstrapFailed {
		return fleetv1.OperationFailed, "the site's BPA reports: " + b.Message, nil
	}
	ready := meta.FindStatusCondition(st.Conditions, sitev1.ApplicationClusterReadyCondition)
	switch {
	case ready == nil || ready.Status != metav1.ConditionTrue:
		msg := "the site reports the cluster not Ready yet"
		if ready != nil {
			msg += ": " + ready.Message
		}
		return fleetv1.OperationInProgress, msg, nil
	case st.KubernetesVersion != ac.Spec.KubernetesVersion:
		return fleetv1.OperationInProgress, fmt.Sprintf("the site reports the cluster Ready but not all nodes at %s yet", ac.Spec.KubernetesVersion), nil
	case !bootstrapDone && b.ObservedGeneration < ac.Generation:
		return fleetv1.OperationInProgress, fmt.Sprintf("waiting for the site's BPA to take in generation %d (it has taken in %d)", ac.Generation, b.ObservedGeneration), nil
	case !bootstrapDone:
		return fleetv1.OperationInProgress, fmt.Sprintf("the site's BPA is %s: %s", b.Phase, b.Message), nil
	}
	return fleetv1.OperationSucceeded, fmt.Sprintf("the cluster runs release %s (Kubernetes %s) and is Ready", op.Release, st.KubernetesVersion), nil
}

// preCachePhase pushes the pre-cache ArtifactSet of the operation's release and reads how far
// the site cache got.
func (r *Reconciler) preCachePhase(ctx context.Context, s *scope, op *fleetv1.SiteOperation) (fleetv1.OperationPhase, string, error) {
	release := &fleetv1.Release{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.site.Namespace, Name: op.Release}, release); err != nil {
		if apierrors.IsNotFound(err) {
			return fleetv1.OperationFailed, fmt.Sprintf("Release %q does not exist", op.Release), nil
		}
		return "", "", fmt.Errorf("get release %s of site %s: %w", op.Release, s.key, err)
	}
	siteClient, err := r.Sites.Client(s.key)
	if err != nil {
		return "", "", fmt.Errorf("pre-cache at site %s: %w", s.key, err)
	}
	set := &sitev1.ArtifactSet{ObjectMeta: metav1.ObjectMeta{Namespace: sitev1.InfoNamespace, Name: preCacheSetName(s.site.Name)}}
	if _, err := controllerutil.CreateOrUpdate(ctx, siteClient, set, func() error {
		if set.CreationTimestamp.IsZero() {
			markPushed(set, map[string]string{sitev1.ClusterLabel: s.site.Name}, s.key.String())
		} else if !managed(set) {
			return fmt.Errorf("ArtifactSet %s/%s exists on the site but was not created by the global controller", set.Namespace, set.Name)
		}
		set.Spec.Artifacts = release.Spec.Artifacts()
		return nil
	}); err != nil {
		s.dirty = true
		return fleetv1.OperationPreCaching, fmt.Sprintf("could not write ArtifactSet %s/%s on the site: %v", set.Namespace, set.Name, err), nil
	}
	ready := meta.FindStatusCondition(set.Status.Conditions, sitev1.ArtifactSetReadyCondition)
	switch {
	case set.Status.ObservedGeneration < set.Generation || ready == nil:
		return fleetv1.OperationPreCaching, fmt.Sprintf("waiting for the site cache to take in ArtifactSet %s/%s", set.Namespace, set.Name), nil
	case ready.Status == metav1.ConditionTrue:
		return fleetv1.OperationPreCached, fmt.Sprintf("the site cache holds the %d artifact(s) of release %s", len(set.Spec.Artifacts), op.Release), nil
	}
	return fleetv1.OperationPreCaching, fmt.Sprintf("the site cache has %d of %d artifact(s): %s", set.Status.Cached, len(set.Spec.Artifacts), ready.Message), nil
}

// removePreCache deletes the pre-cache ArtifactSet once the operation that needs it is over:
// after an Apply's verdict (the cluster's own ArtifactSet holds what it runs). A pre-cached
// release stays cached until the Apply that follows it.
func (r *Reconciler) removePreCache(ctx context.Context, s *scope) error {
	if s.site.Spec.Operation.Stage != fleetv1.StageApply || !s.siteAnswers() {
		return nil
	}
	siteClient, err := r.Sites.Client(s.key)
	if err != nil {
		return fmt.Errorf("remove pre-cache set of site %s: %w", s.key, err)
	}
	set := &sitev1.ArtifactSet{}
	err = siteClient.Get(ctx, client.ObjectKey{Namespace: sitev1.InfoNamespace, Name: preCacheSetName(s.site.Name)}, set)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("read pre-cache set of site %s: %w", s.key, err)
	case !managed(set):
		return nil
	}
	if err := siteClient.Delete(ctx, set); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete pre-cache set of site %s: %w", s.key, err)
	}
	return nil
}
