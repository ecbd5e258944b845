package ui

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/campaign/plan"
)

var campaignListPage = page{
	template: "campaigns",
	title:    func(*request) string { return "Campaigns" },
	load:     (*Server).loadCampaignList,
	watch:    func(req *request) func(Change) bool { return inNamespace(req.Namespace, KindCampaign) },
}

var campaignPage = page{
	template: "campaign",
	title:    func(req *request) string { return "Campaign " + req.Name },
	load:     (*Server).loadCampaign,
	watch: func(req *request) func(Change) bool {
		return func(ch Change) bool {
			return ch.Kind == KindCampaign && ch.Namespace == req.Namespace && ch.Name == req.Name
		}
	},
}

// campaignRow is one campaign's line.
type campaignRow struct {
	Namespace, Name string
	Action, Release string
	Phase           fleetv1.CampaignPhase
	Final, Paused   bool
	Aborted         bool
	// Done of Total sites finished (succeeded, failed, timed out, skipped); Failed failed or
	// timed out.
	Done, Total, Failed int32
	Counts              fleetv1.CampaignCounts
	// Reason and Message are the Progressing condition's (or Complete's, once final).
	Reason, Message    string
	Started, Completed time.Time
}

func newCampaignRow(c *fleetv1.Campaign) campaignRow {
	st := &c.Status
	n := st.Counts
	r := campaignRow{Namespace: c.Namespace, Name: c.Name, Action: string(c.Spec.Action), Release: c.Spec.Release,
		Phase: st.Phase, Final: st.Phase.Final(), Paused: c.Spec.Paused, Aborted: c.Spec.Abort,
		Done: n.Succeeded + n.Failed + n.TimedOut + n.Skipped, Total: st.Total, Failed: st.Failed, Counts: n,
		Started: timeOf(st.StartTime), Completed: timeOf(st.CompletionTime)}
	if r.Phase == "" {
		r.Phase = fleetv1.CampaignPending
	}
	cond := fleetv1.CampaignProgressingCondition
	if r.Final {
		cond = fleetv1.CampaignCompleteCondition
	}
	if c := apimeta.FindStatusCondition(st.Conditions, cond); c != nil {
		r.Reason, r.Message = c.Reason, c.Message
	}
	return r
}

func (s *Server) loadCampaignList(ctx context.Context, req *request) (any, error) {
	if err := s.authorize(ctx, req.User, fleetAccess("list", "campaigns", req.Namespace, "")); err != nil {
		return nil, err
	}
	list := &fleetv1.CampaignList{}
	if err := s.cfg.Cache.List(ctx, list, client.InNamespace(req.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list campaigns: %w", err)
	}
	rows := make([]campaignRow, 0, len(list.Items))
	for i := range list.Items {
		rows = append(rows, newCampaignRow(&list.Items[i]))
	}
	// Running first, then by the time they started or ended, newest first.
	slices.SortFunc(rows, func(a, b campaignRow) int {
		return cmp.Or(cmp.Compare(boolRank(a.Final), boolRank(b.Final)),
			latest(b).Compare(latest(a)), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return rows, nil
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

func latest(r campaignRow) time.Time {
	if r.Completed.After(r.Started) {
		return r.Completed
	}
	return r.Started
}

// campaignData is everything a campaign's page shows.
type campaignData struct {
	Campaign *fleetv1.Campaign
	Row      campaignRow
	Targets  string
	// Waves of the plan: the dry run's, or the strategy's cut of the sites not skipped.
	Waves []waveRow
	// PlanProblem says why there are no waves.
	PlanProblem string
	Conditions  []metav1.Condition
	// Pause, Resume and Abort are the buttons shown: what the user may do (RBAC: patch on the
	// campaign) that makes sense in the campaign's state.
	Pause, Resume, Abort bool
}

// waveRow is one wave of the plan.
type waveRow struct {
	Index        int
	Canary       bool
	Size, Window int
	// State: finished (every site finished), running (sites dispatched), waiting.
	State string
	// Sites of the wave, for a dry run's plan (perhaps cut short).
	Sites []string
}

func (s *Server) loadCampaign(ctx context.Context, req *request) (any, error) {
	ns, name := req.Namespace, req.Name
	if err := s.authorize(ctx, req.User, fleetAccess("get", "campaigns", ns, name)); err != nil {
		return nil, err
	}
	c := &fleetv1.Campaign{}
	if err := s.cfg.Cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &httpError{status: http.StatusNotFound, msg: fmt.Sprintf("campaign %q not found in namespace %q", name, ns)}
		}
		return nil, fmt.Errorf("get campaign %s/%s: %w", ns, name, err)
	}
	d := &campaignData{Campaign: c, Row: newCampaignRow(c), Targets: describeTargets(c.Spec.Targets), Conditions: problemsFirst(c.Status.Conditions)}
	d.Waves, d.PlanProblem = waves(c)
	if !d.Row.Final && s.allowed(ctx, req.User, fleetAccess("patch", "campaigns", ns, name)) {
		d.Pause = !c.Spec.Paused && !c.Spec.Abort
		d.Resume = c.Spec.Paused && !c.Spec.Abort
		d.Abort = !c.Spec.Abort
	}
	return d, nil
}

// waves is the campaign's plan: the dry run's, or the waves the strategy cuts the sites that
// are not skipped into (as the campaign controller does), each with how far it went.
func waves(c *fleetv1.Campaign) ([]waveRow, string) {
	st := &c.Status
	if p := st.Plan; p != nil {
		rows := make([]waveRow, 0, len(p.Waves))
		for _, w := range p.Waves {
			rows = append(rows, waveRow{Index: int(w.Index), Canary: w.Canary, Size: int(w.Size), Window: int(w.Window), State: "planned", Sites: w.Sites})
		}
		return rows, ""
	}
	if st.Waves == 0 && st.Phase.Final() {
		return nil, fmt.Sprintf("no plan: the campaign ended %s before it cut its sites into waves (its conditions say why)", st.Phase)
	}
	if st.Waves == 0 {
		return nil, "no plan yet: the campaign has not cut its sites into waves (it waits for its release, or for the campaigns it is blocked by)"
	}
	eligible := int(st.Total - st.Counts.Skipped)
	limits, err := plan.Resolve(c.Spec.Strategy, eligible)
	if err != nil {
		return nil, err.Error()
	}
	var rows []waveRow
	for i, w := range plan.Waves(eligible, limits) {
		r := waveRow{Index: i, Canary: w.Canary, Size: w.Size(), Window: w.Window, State: "waiting"}
		switch {
		case i < int(st.FinishedWaves):
			r.State = "finished"
		case st.StartTime != nil && i <= int(st.CurrentWave):
			r.State = "running"
		}
		rows = append(rows, r)
	}
	return rows, ""
}

// describeTargets says which sites a campaign targets.
func describeTargets(t fleetv1.CampaignTargets) string {
	var parts []string
	if len(t.Names) > 0 {
		parts = append(parts, fmt.Sprintf("%d named sites", len(t.Names)))
	}
	if t.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(t.Selector)
		switch {
		case err != nil:
			parts = append(parts, "an invalid selector: "+err.Error())
		case sel.Empty():
			parts = append(parts, "every site of the namespace")
		default:
			parts = append(parts, "sites with labels "+sel.String())
		}
	}
	if len(t.Exclude) > 0 {
		parts = append(parts, "except "+strings.Join(t.Exclude, ", "))
	}
	return strings.Join(parts, "; ")
}
