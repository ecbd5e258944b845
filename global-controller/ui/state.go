package ui

import (
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// SiteState is where a site stands, in the words of the fleet overview.
type SiteState string

// Site states. Unreachable is a state of its own, never a failure: the site may be fine, the
// link is not.
const (
	// StateReady sites can take work: reachable, and their cluster (if they have one) is Ready
	// at the desired release.
	StateReady SiteState = "Ready"
	// StateProvisioning sites are building, updating or patching their cluster, or have an
	// operation under way.
	StateProvisioning SiteState = "Provisioning"
	// StateDegraded sites need someone: a bad kubeconfig, a push that failed, a cluster not
	// Ready, a failed host or package, or a failed operation.
	StateDegraded SiteState = "Degraded"
	// StateUnreachable sites did not answer the last probe.
	StateUnreachable SiteState = "Unreachable"
	// StateNotChecked sites have not been looked at by the controller yet.
	StateNotChecked SiteState = "NotChecked"
)

// siteStates lists the states in the order the overview shows them.
var siteStates = []SiteState{StateReady, StateProvisioning, StateDegraded, StateUnreachable, StateNotChecked}

// siteStatus is a site's state, and why, since when.
type siteStatus struct {
	State SiteState
	// Reason is one word (a condition's reason, or a phase).
	Reason string
	// Message says what was seen.
	Message string
	// Since is when the site entered this state, as far as the object tells; zero when it
	// does not.
	Since time.Time
}

// classify says where a site stands, from its conditions, the cluster summary it reports and
// its last operation. The first rule that matches wins:
//
//  1. no Ready condition yet: NotChecked;
//  2. Reachable False: Unreachable (whatever else the status says: it is as last reported);
//  3. KubeconfigValid False: Degraded;
//  4. the operation of spec.operation failed or timed out: Degraded;
//  5. with spec.cluster: a push refused (ClusterSynced False, other than ReleaseNotSet),
//     a cluster or BPA phase Degraded/Failed, or ClusterReady False while nothing is under way:
//     Degraded; an operation under way, a cluster not reported yet or in a phase other than
//     Provisioned, a BPA installing or patching: Provisioning;
//  6. Ready True: Ready; otherwise Degraded.
func classify(s *fleetv1.Site) siteStatus {
	conds := s.Status.Conditions
	ready := apimeta.FindStatusCondition(conds, fleetv1.SiteReadyCondition)
	if ready == nil {
		return siteStatus{State: StateNotChecked, Reason: fleetv1.ReasonNotChecked, Message: "the controller has not probed the site yet", Since: s.CreationTimestamp.Time}
	}
	if c := falseCondition(conds, fleetv1.SiteReachableCondition); c != nil {
		return fromCondition(StateUnreachable, c)
	}
	if c := falseCondition(conds, fleetv1.SiteKubeconfigValidCondition); c != nil {
		return fromCondition(StateDegraded, c)
	}
	op, last := s.Spec.Operation, s.Status.LastOperation
	current := op != nil && last != nil && last.ID == op.ID
	if current && (last.Phase == fleetv1.OperationFailed || last.Phase == fleetv1.OperationTimedOut) {
		return siteStatus{State: StateDegraded, Reason: "Operation" + string(last.Phase),
			Message: string(op.Action) + " to release " + op.Release + " (campaign " + op.Campaign + "): " + last.Message, Since: timeOf(last.CompletionTime)}
	}
	if s.Spec.Cluster != nil {
		settled := current && (finalPhase(last.Phase) || last.Phase == fleetv1.OperationPreCached)
		if st, ok := clusterStatus(s, op != nil && !settled); ok {
			return st
		}
	}
	if ready.Status == metav1.ConditionTrue {
		return fromCondition(StateReady, ready)
	}
	return fromCondition(StateDegraded, ready)
}

// clusterStatus classifies a site by its application cluster (rule 5 of classify); false
// when the cluster says nothing against Ready. busy is set while an operation is under way.
func clusterStatus(s *fleetv1.Site, busy bool) (siteStatus, bool) {
	conds := s.Status.Conditions
	if c := falseCondition(conds, fleetv1.SiteClusterSyncedCondition); c != nil && c.Reason != fleetv1.ReasonReleaseNotSet {
		return fromCondition(StateDegraded, c), true
	}
	cl := s.Status.Cluster
	if cl != nil && cl.Phase == sitev1.ClusterDegraded {
		return siteStatus{State: StateDegraded, Reason: "Cluster" + string(cl.Phase), Message: firstNonEmpty(cl.LastError, cl.Message),
			Since: conditionTime(conds, fleetv1.SiteClusterReadyCondition)}, true
	}
	if cl != nil && cl.Bootstrap != nil && cl.Bootstrap.Phase == sitev1.BootstrapFailed {
		return siteStatus{State: StateDegraded, Reason: "Bootstrap" + string(cl.Bootstrap.Phase), Message: cl.Bootstrap.Message,
			Since: conditionTime(conds, fleetv1.SiteClusterReadyCondition)}, true
	}
	clusterReady := apimeta.FindStatusCondition(conds, fleetv1.SiteClusterReadyCondition)
	switch {
	case busy:
		last := s.Status.LastOperation
		msg := string(s.Spec.Operation.Action) + " to release " + s.Spec.Operation.Release + " (campaign " + s.Spec.Operation.Campaign + ")"
		since := s.Spec.Operation.DispatchTime.Time
		if last != nil && last.ID == s.Spec.Operation.ID && last.Message != "" {
			msg += ": " + last.Message
		}
		return siteStatus{State: StateProvisioning, Reason: "Operation", Message: msg, Since: since}, true
	case cl == nil || clusterReady == nil || clusterReady.Reason == fleetv1.ReasonClusterNotReported:
		if c := apimeta.FindStatusCondition(conds, fleetv1.SiteClusterSyncedCondition); c != nil && c.Reason == fleetv1.ReasonReleaseNotSet {
			return siteStatus{}, false // described, waiting for an install: nothing under way
		}
		return siteStatus{State: StateProvisioning, Reason: fleetv1.ReasonClusterNotReported, Message: "the site has not reported its application cluster yet",
			Since: conditionTime(conds, fleetv1.SiteClusterSyncedCondition)}, true
	case cl.Phase != sitev1.ClusterProvisioned && cl.Phase != "":
		return siteStatus{State: StateProvisioning, Reason: "Cluster" + string(cl.Phase), Message: cl.Message, Since: timeOf(&clusterReady.LastTransitionTime)}, true
	case cl.Bootstrap != nil && (cl.Bootstrap.Phase == sitev1.BootstrapInstalling || cl.Bootstrap.Phase == sitev1.BootstrapPatching):
		return siteStatus{State: StateProvisioning, Reason: "Bootstrap" + string(cl.Bootstrap.Phase), Message: cl.Bootstrap.Message, Since: timeOf(&clusterReady.LastTransitionTime)}, true
	case clusterReady.Status == metav1.ConditionFalse:
		return fromCondition(StateDegraded, clusterReady), true
	}
	return siteStatus{}, false
}

func falseCondition(conds []metav1.Condition, t string) *metav1.Condition {
	c := apimeta.FindStatusCondition(conds, t)
	if c == nil || c.Status != metav1.ConditionFalse {
		return nil
	}
	return c
}

func fromCondition(state SiteState, c *metav1.Condition) siteStatus {
	return siteStatus{State: state, Reason: c.Reason, Message: c.Message, Since: c.LastTransitionTime.Time}
}

func conditionTime(conds []metav1.Condition, t string) time.Time {
	if c := apimeta.FindStatusCondition(conds, t); c != nil {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

func finalPhase(p fleetv1.OperationPhase) bool {
	return p == fleetv1.OperationSucceeded || p == fleetv1.OperationFailed || p == fleetv1.OperationTimedOut
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
