package ui

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

var t0 = time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)

func cond(t string, s metav1.ConditionStatus, reason string, at time.Duration) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: "msg of " + reason, LastTransitionTime: metav1.NewTime(t0.Add(at))}
}

// site builds a Site with spec.cluster, Ready and Reachable True and a cluster Provisioned and
// Ready at r1; each change edits it.
func site(changes ...func(*fleetv1.Site)) *fleetv1.Site {
	s := &fleetv1.Site{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "store-1", CreationTimestamp: metav1.NewTime(t0)},
		Spec:       fleetv1.SiteSpec{Cluster: &fleetv1.SiteCluster{Release: "r1"}},
		Status: fleetv1.SiteStatus{
			Conditions: []metav1.Condition{
				cond(fleetv1.SiteKubeconfigValidCondition, metav1.ConditionTrue, fleetv1.ReasonKubeconfigValid, 0),
				cond(fleetv1.SiteReachableCondition, metav1.ConditionTrue, fleetv1.ReasonAPIServerReachable, time.Minute),
				cond(fleetv1.SiteReadyCondition, metav1.ConditionTrue, fleetv1.ReasonSiteReady, time.Minute),
				cond(fleetv1.SiteClusterSyncedCondition, metav1.ConditionTrue, fleetv1.ReasonClusterSynced, 2*time.Minute),
				cond(fleetv1.SiteClusterReadyCondition, metav1.ConditionTrue, fleetv1.ReasonClusterReady, 3*time.Minute),
			},
			Cluster: &fleetv1.ClusterSummary{Phase: sitev1.ClusterProvisioned, KubernetesVersion: "v1.36.3"},
		},
	}
	for _, c := range changes {
		c(s)
	}
	return s
}

func setCond(c metav1.Condition) func(*fleetv1.Site) {
	return func(s *fleetv1.Site) {
		for i := range s.Status.Conditions {
			if s.Status.Conditions[i].Type == c.Type {
				s.Status.Conditions[i] = c
				return
			}
		}
		s.Status.Conditions = append(s.Status.Conditions, c)
	}
}

func operation(phase fleetv1.OperationPhase, sameID bool) func(*fleetv1.Site) {
	return func(s *fleetv1.Site) {
		s.Spec.Operation = &fleetv1.SiteOperation{ID: "uid-1", Campaign: "patch-1", Action: fleetv1.ActionPatch, Stage: fleetv1.StageApply,
			Release: "r2", DispatchTime: metav1.NewTime(t0.Add(10 * time.Minute))}
		if phase == "" {
			return
		}
		id := "uid-1"
		if !sameID {
			id = "uid-0"
		}
		done := metav1.NewTime(t0.Add(20 * time.Minute))
		s.Status.LastOperation = &fleetv1.SiteOperationStatus{ID: id, Phase: phase, Message: "the site said so", CompletionTime: &done}
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		name       string
		site       *fleetv1.Site
		want       SiteState
		wantReason string
		wantSince  time.Duration // since t0
	}{
		{name: "ready", site: site(), want: StateReady, wantReason: fleetv1.ReasonSiteReady, wantSince: time.Minute},
		{name: "no conditions yet", site: site(func(s *fleetv1.Site) { s.Status = fleetv1.SiteStatus{} }), want: StateNotChecked, wantReason: fleetv1.ReasonNotChecked},
		{name: "unreachable, whatever its cluster last said",
			site: site(setCond(cond(fleetv1.SiteReachableCondition, metav1.ConditionFalse, fleetv1.ReasonAPIServerUnreachable, 30*time.Minute)),
				setCond(cond(fleetv1.SiteReadyCondition, metav1.ConditionFalse, fleetv1.ReasonSiteNotReady, 30*time.Minute)),
				func(s *fleetv1.Site) { s.Status.Cluster.Phase = sitev1.ClusterDegraded }, operation(fleetv1.OperationFailed, true)),
			want: StateUnreachable, wantReason: fleetv1.ReasonAPIServerUnreachable, wantSince: 30 * time.Minute},
		{name: "unreachable during an operation is not failed",
			site: site(setCond(cond(fleetv1.SiteReachableCondition, metav1.ConditionFalse, fleetv1.ReasonAPIServerUnreachable, 30*time.Minute)), operation(fleetv1.OperationInProgress, true)),
			want: StateUnreachable, wantReason: fleetv1.ReasonAPIServerUnreachable, wantSince: 30 * time.Minute},
		{name: "kubeconfig invalid",
			site: site(setCond(cond(fleetv1.SiteKubeconfigValidCondition, metav1.ConditionFalse, fleetv1.ReasonKubeconfigUnsafe, 5*time.Minute)),
				setCond(cond(fleetv1.SiteReachableCondition, metav1.ConditionUnknown, fleetv1.ReasonNotChecked, 5*time.Minute))),
			want: StateDegraded, wantReason: fleetv1.ReasonKubeconfigUnsafe, wantSince: 5 * time.Minute},
		{name: "its operation failed", site: site(operation(fleetv1.OperationFailed, true)), want: StateDegraded, wantReason: "OperationFailed", wantSince: 20 * time.Minute},
		{name: "its operation timed out", site: site(operation(fleetv1.OperationTimedOut, true)), want: StateDegraded, wantReason: "OperationTimedOut", wantSince: 20 * time.Minute},
		{name: "an older operation's failure does not count while a new one runs", site: site(operation(fleetv1.OperationFailed, false)),
			want: StateProvisioning, wantReason: "Operation", wantSince: 10 * time.Minute},
		{name: "operation dispatched, not taken in", site: site(operation("", true)), want: StateProvisioning, wantReason: "Operation", wantSince: 10 * time.Minute},
		{name: "operation in progress", site: site(operation(fleetv1.OperationInProgress, true)), want: StateProvisioning, wantReason: "Operation", wantSince: 10 * time.Minute},
		{name: "pre-cached, waiting for the apply", site: site(operation(fleetv1.OperationPreCached, true)), want: StateReady, wantReason: fleetv1.ReasonSiteReady, wantSince: time.Minute},
		{name: "operation succeeded", site: site(operation(fleetv1.OperationSucceeded, true)), want: StateReady, wantReason: fleetv1.ReasonSiteReady, wantSince: time.Minute},
		{name: "push failed", site: site(setCond(cond(fleetv1.SiteClusterSyncedCondition, metav1.ConditionFalse, fleetv1.ReasonPushFailed, 7*time.Minute))),
			want: StateDegraded, wantReason: fleetv1.ReasonPushFailed, wantSince: 7 * time.Minute},
		{name: "no release yet: registered and ready for an install",
			site: site(setCond(cond(fleetv1.SiteClusterSyncedCondition, metav1.ConditionFalse, fleetv1.ReasonReleaseNotSet, 7*time.Minute)),
				func(s *fleetv1.Site) {
					s.Status.Cluster = nil
					s.Status.Conditions = s.Status.Conditions[:4]
				}),
			want: StateReady, wantReason: fleetv1.ReasonSiteReady, wantSince: time.Minute},
		{name: "cluster degraded", site: site(func(s *fleetv1.Site) {
			s.Status.Cluster.Phase, s.Status.Cluster.LastError = sitev1.ClusterDegraded, "host h1 failed"
		}),
			want: StateDegraded, wantReason: "ClusterDegraded", wantSince: 3 * time.Minute},
		{name: "BPA failed", site: site(func(s *fleetv1.Site) {
			s.Status.Cluster.Bootstrap = &sitev1.BootstrapStatus{Phase: sitev1.BootstrapFailed, Message: "kubelet health check failed on h1"}
		}), want: StateDegraded, wantReason: "BootstrapFailed", wantSince: 3 * time.Minute},
		{name: "cluster not reported yet", site: site(func(s *fleetv1.Site) { s.Status.Cluster = nil }),
			want: StateProvisioning, wantReason: fleetv1.ReasonClusterNotReported, wantSince: 2 * time.Minute},
		{name: "cluster provisioning", site: site(func(s *fleetv1.Site) { s.Status.Cluster.Phase = sitev1.ClusterProvisioning },
			setCond(cond(fleetv1.SiteClusterReadyCondition, metav1.ConditionFalse, fleetv1.ReasonClusterNotReady, 4*time.Minute))),
			want: StateProvisioning, wantReason: "ClusterProvisioning", wantSince: 4 * time.Minute},
		{name: "BPA patching", site: site(func(s *fleetv1.Site) {
			s.Status.Cluster.Bootstrap = &sitev1.BootstrapStatus{Phase: sitev1.BootstrapPatching}
		}), want: StateProvisioning, wantReason: "BootstrapPatching", wantSince: 3 * time.Minute},
		{name: "cluster provisioned but not Ready", site: site(setCond(cond(fleetv1.SiteClusterReadyCondition, metav1.ConditionFalse, fleetv1.ReasonClusterNotReady, 9*time.Minute))),
			want: StateDegraded, wantReason: fleetv1.ReasonClusterNotReady, wantSince: 9 * time.Minute},
		{name: "no spec.cluster: only the site counts", site: site(func(s *fleetv1.Site) { s.Spec.Cluster, s.Status.Cluster = nil, nil }),
			want: StateReady, wantReason: fleetv1.ReasonSiteReady, wantSince: time.Minute},
		{name: "not Ready for another reason", site: site(setCond(cond(fleetv1.SiteReadyCondition, metav1.ConditionFalse, fleetv1.ReasonSiteNotReady, 8*time.Minute))),
			want: StateDegraded, wantReason: fleetv1.ReasonSiteNotReady, wantSince: 8 * time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := classify(tc.site)
			if got.State != tc.want || got.Reason != tc.wantReason || !got.Since.Equal(t0.Add(tc.wantSince)) {
				t.Errorf("classify = %s %s since %s (%q); want %s %s since %s", got.State, got.Reason, got.Since.Sub(t0), got.Message, tc.want, tc.wantReason, tc.wantSince)
			}
		})
	}
}
