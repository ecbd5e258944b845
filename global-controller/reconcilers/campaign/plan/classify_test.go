package plan

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

func TestClassify(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	c := Campaign{ID: "uid-1", Release: "r2", Soak: 10 * time.Minute}
	op := func(id string, deadline time.Duration) *fleetv1.SiteOperation {
		return &fleetv1.SiteOperation{ID: id, Campaign: "c", Action: fleetv1.ActionPatch, Stage: fleetv1.StageApply, Release: "r2", PreviousRelease: "r1", DispatchTime: *at(-time.Hour), Deadline: at(deadline)}
	}
	last := func(id string, phase fleetv1.OperationPhase, completed time.Duration) *fleetv1.SiteOperationStatus {
		return &fleetv1.SiteOperationStatus{ID: id, Release: "r2", Phase: phase, CompletionTime: at(completed), Message: "boom"}
	}
	site := func(o *fleetv1.SiteOperation, l *fleetv1.SiteOperationStatus, release string) *fleetv1.Site {
		s := &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Name: "s"}}
		s.Spec.Cluster = &fleetv1.SiteCluster{Release: release}
		s.Spec.Operation, s.Status.LastOperation = o, l
		return s
	}
	tests := []struct {
		name     string
		site     *fleetv1.Site
		state    State
		busy     bool
		rollback Rollback
		recheck  time.Time
	}{
		{"no cluster: skipped", &fleetv1.Site{}, Skipped, false, NoRollback, time.Time{}},
		{"never touched", site(nil, nil, "r1"), Pending, false, NoRollback, time.Time{}},
		{"already at release", site(nil, &fleetv1.SiteOperationStatus{ID: "other", Release: "r2", Phase: fleetv1.OperationSucceeded}, "r2"), Skipped, false, NoRollback, time.Time{}},
		{"another campaign's operation runs", site(op("other", time.Hour), nil, "r1"), Pending, true, NoRollback, now.Add(time.Hour)},
		{"another campaign's operation finished", site(op("other", time.Hour), last("other", fleetv1.OperationFailed, -time.Minute), "r1"), Pending, false, NoRollback, time.Time{}},
		{"another campaign's operation past its deadline", site(op("other", -time.Minute), nil, "r1"), Pending, false, NoRollback, time.Time{}},
		{"dispatched, not taken in", site(op("uid-1", time.Hour), last("other", fleetv1.OperationSucceeded, -time.Hour), "r2"), InProgress, false, NoRollback, now.Add(time.Hour)},
		{"in progress", site(op("uid-1", time.Hour), last("uid-1", fleetv1.OperationInProgress, 0), "r2"), InProgress, false, NoRollback, now.Add(time.Hour)},
		{"deadline passed", site(op("uid-1", -time.Second), last("uid-1", fleetv1.OperationInProgress, 0), "r2"), TimedOut, false, NoRollback, time.Time{}},
		{"succeeded, soaking", site(op("uid-1", time.Hour), last("uid-1", fleetv1.OperationSucceeded, -time.Minute), "r2"), InProgress, false, NoRollback, now.Add(9 * time.Minute)},
		{"succeeded and soaked", site(op("uid-1", time.Hour), last("uid-1", fleetv1.OperationSucceeded, -10*time.Minute), "r2"), Succeeded, false, NoRollback, time.Time{}},
		{"failed", site(op("uid-1", time.Hour), last("uid-1", fleetv1.OperationFailed, 0), "r2"), Failed, false, NoRollback, time.Time{}},
		{"timed out at the site", site(op("uid-1", time.Hour), last("uid-1", fleetv1.OperationTimedOut, 0), "r2"), TimedOut, false, NoRollback, time.Time{}},
		{"pre-caching", site(op("uid-1-precache", time.Hour), last("uid-1-precache", fleetv1.OperationPreCaching, 0), "r1"), PreCaching, false, NoRollback, now.Add(time.Hour)},
		{"pre-cached", site(op("uid-1-precache", time.Hour), last("uid-1-precache", fleetv1.OperationPreCached, 0), "r1"), PreCached, false, NoRollback, time.Time{}},
		{"pre-cache failed", site(op("uid-1-precache", time.Hour), last("uid-1-precache", fleetv1.OperationFailed, 0), "r1"), Failed, false, NoRollback, time.Time{}},
		{"rolling back", site(op("uid-1-rollback", time.Hour), nil, "r1"), Failed, false, RollingBack, now.Add(time.Hour)},
		{"rolled back", site(op("uid-1-rollback", time.Hour), last("uid-1-rollback", fleetv1.OperationSucceeded, 0), "r1"), Failed, false, RolledBack, time.Time{}},
		{"rollback failed", site(op("uid-1-rollback", time.Hour), last("uid-1-rollback", fleetv1.OperationFailed, 0), "r1"), Failed, false, RollbackFailed, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, recheck := Classify(tt.site, c, now)
			if s.State != tt.state || s.Busy != tt.busy || s.Rollback != tt.rollback {
				t.Errorf("got %v busy=%v rollback=%v, want %v busy=%v rollback=%v", s.State, s.Busy, s.Rollback, tt.state, tt.busy, tt.rollback)
			}
			if !recheck.Equal(tt.recheck) {
				t.Errorf("recheck at %v, want %v", recheck, tt.recheck)
			}
			if (s.State == Failed || s.State == TimedOut || s.State == Skipped) && s.Reason == "" {
				t.Errorf("%v without a reason", s.State)
			}
		})
	}
}

// TestClassifyVersionSkew checks that a site whose cluster runs v1.36.3 is Skipped, with the
// rule in the reason, by a campaign whose release is at v1.34.0, v1.35.8, v1.36.2 or v1.38.0
// (the anchors of issue 35); that v1.36.3, v1.36.4 and v1.37.0 are planned; that the API
// servers' version, when the BPA reports it, is the one judged (an upgrade that failed at the
// first kubelet left them newer than every node's); that a site whose version is unknown
// (never installed, or nodes on different versions) or held by another campaign is not
// judged; and that a failed site is rolled back only where the rollback does not downgrade a
// control plane that finished moving.
func TestClassifyVersionSkew(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	deadline := metav1.NewTime(now.Add(time.Hour))
	versions := map[string]string{
		"r1.34.0": "v1.34.0", "r1.35.8": "v1.35.8", "r1.36.2": "v1.36.2", "r1.36.3": "v1.36.3",
		"r1.36.4": "v1.36.4", "r1.37.0": "v1.37.0", "r1.38.0": "v1.38.0", "r1.39.1": "v1.39.1",
		"r1.41.0": "v1.41.0",
	}
	// The steps of each case that moves a site more than one minor version.
	steps := map[string][]string{
		"two minors up, through the release between":     {"r1.37.0", "r1.38.0"},
		"API servers on v1.36.3, to v1.38 through v1.37": {"r1.37.0", "r1.38.0"},
	}
	site := func(running string) *fleetv1.Site {
		s := &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Name: "site-a"}}
		s.Spec.Cluster = &fleetv1.SiteCluster{Release: "r1.36.3"}
		s.Status.Cluster = &fleetv1.ClusterSummary{KubernetesVersion: running}
		return s
	}
	// withAPIServer has the site's BPA report the kube-apiserver package it rolled out to every
	// control-plane node.
	withAPIServer := func(s *fleetv1.Site, version string) *fleetv1.Site {
		s.Status.Cluster.Bootstrap = &sitev1.BootstrapStatus{Packages: []sitev1.InstalledPackage{
			{Name: "etcd", Version: "3.6.16"}, {Name: "kube-apiserver", Version: version}, {Name: "kubelet", Version: "1.35.8"},
		}}
		return s
	}
	for _, tt := range []struct {
		name    string
		site    *fleetv1.Site
		release string
		state   State
		reason  string
	}{
		{"two minors back", site("v1.36.3"), "r1.34.0", Skipped, "v1.34.0 would downgrade the control plane from v1.36.3"},
		{"one minor back", site("v1.36.3"), "r1.35.8", Skipped, "no control-plane downgrade"},
		{"one patch back", site("v1.36.3"), "r1.36.2", Skipped, "no control-plane downgrade"},
		{"two minors up, through the release between", site("v1.36.3"), "r1.38.0", Pending, ""},
		{"five minors up, no release at v1.40 to step through", site("v1.36.3"), "r1.41.0", Skipped, "no Release of this namespace is at v1.40 to step through"},
		{"same version (a patch campaign)", site("v1.36.3"), "r1.36.3", Pending, ""},
		{"one patch up", site("v1.36.3"), "r1.36.4", Pending, ""},
		{"one minor up", site("v1.36.3"), "r1.37.0", Pending, ""},
		{"never installed", func() *fleetv1.Site { s := site(""); s.Status.Cluster = nil; return s }(), "r1.34.0", Pending, ""},
		{"nodes on different versions", site(""), "r1.38.0", Pending, ""},
		{"release version unknown", site("v1.36.3"), "r-missing", Pending, ""},
		{"API servers on v1.36.3, every kubelet still on v1.35.8", withAPIServer(site("v1.35.8"), "1.36.3-1"), "r1.35.8", Skipped, "v1.35.8 would downgrade the control plane from v1.36.3"},
		{"API servers on v1.36.3, kubelets on different versions", withAPIServer(site(""), "1.36.3"), "r1.41.0", Skipped, "at most one minor version per upgrade"},
		{"API servers on v1.36.3, to v1.38 through v1.37", withAPIServer(site(""), "1.36.3"), "r1.38.0", Pending, ""},
		{"API servers on v1.36.3, to v1.37", withAPIServer(site("v1.35.8"), "1.36.3"), "r1.37.0", Pending, ""},
		{"held by another campaign", func() *fleetv1.Site {
			s := site("v1.36.3")
			s.Spec.Operation = &fleetv1.SiteOperation{ID: "other", Deadline: &deadline}
			return s
		}(), "r1.34.0", Pending, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := Classify(tt.site, Campaign{ID: "uid-1", Release: tt.release, Versions: versions}, now)
			if s.State != tt.state || s.UpToDate {
				t.Fatalf("got %v (up to date %v, %q), want %v", s.State, s.UpToDate, s.Reason, tt.state)
			}
			if tt.reason != "" && (!strings.HasPrefix(s.Reason, ReasonVersionSkew+": ") || !strings.Contains(s.Reason, tt.reason)) {
				t.Fatalf("reason %q, want %q then %q", s.Reason, ReasonVersionSkew, tt.reason)
			}
			if want := steps[tt.name]; !slices.Equal(s.Steps, want) || (want != nil) != (s.Step == 1) {
				t.Fatalf("steps %v (next %d), want %v from step 1", s.Steps, s.Step, want)
			}
		})
	}

	failed := func(running string) *fleetv1.Site {
		s := site(running)
		s.Spec.Cluster.Release = "r1.37.0"
		s.Spec.Operation = &fleetv1.SiteOperation{ID: "uid-1", Release: "r1.37.0", PreviousRelease: "r1.36.3", Deadline: &deadline}
		s.Status.LastOperation = &fleetv1.SiteOperationStatus{ID: "uid-1", Release: "r1.37.0", Phase: fleetv1.OperationFailed, Message: "chart cni failed"}
		return s
	}
	for _, tt := range []struct {
		name, running, apiServer string
		rollback                 bool
	}{
		{"control plane never moved", "v1.36.3", "", true},
		{"nodes on different versions: the move did not finish", "", "", true},
		{"every node moved: a rollback would downgrade", "v1.37.0", "", false},
		{"API servers did not all move", "", "1.36.3", true},
		{"API servers moved, no kubelet did: a rollback would downgrade them", "v1.36.3", "1.37.0", false},
	} {
		t.Run("rollback, "+tt.name, func(t *testing.T) {
			obj := failed(tt.running)
			if tt.apiServer != "" {
				withAPIServer(obj, tt.apiServer)
			}
			s, _ := Classify(obj, Campaign{ID: "uid-1", Release: "r1.37.0", Versions: versions}, now)
			if s.State != Failed || s.PreviousRelease != "r1.36.3" {
				t.Fatalf("got %v from %q, want Failed from r1.36.3", s.State, s.PreviousRelease)
			}
			d := Decide(Input{Sites: []Site{s}, Limits: Limits{Initial: 1, Max: 1}, Rollback: true})
			if got := len(d.Rollback) == 1; got != tt.rollback {
				t.Fatalf("rolled back: %v, want %v (%q)", got, tt.rollback, s.NoRollback)
			}
			if !tt.rollback && !strings.Contains(s.NoRollback, "v1.36.3 would downgrade the control plane from v1.37.0") {
				t.Fatalf("no rollback, saying %q: want the rule named", s.NoRollback)
			}
		})
	}
}
