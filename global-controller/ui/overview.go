package ui

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

// maxProblems is how many sites the overview lists under recent problems.
const maxProblems = 10

// maxEnded is how many finished campaigns the overview lists.
const maxEnded = 5

var overviewPage = page{
	template: "overview",
	title:    func(*request) string { return "Fleet overview" },
	load:     (*Server).loadOverview,
	watch:    func(req *request) func(Change) bool { return inNamespace(req.Namespace, KindSite, KindCampaign) },
}

// overviewData is the fleet at a glance: the sites the user may see (listVisibleSites), and the
// campaigns when the user may list them.
type overviewData struct {
	Total  int
	States []valueCount
	// Releases and Versions count the sites by spec.cluster.release and by the Kubernetes
	// version their cluster reports, most common first.
	Releases, Versions []valueCount
	// Running are the campaigns that have not ended; Ended the last ones that did.
	Running, Ended []campaignRow
	// Problems are the Degraded and Unreachable sites, newest problem first, at most
	// maxProblems of ProblemCount.
	Problems     []siteRow
	ProblemCount int
	// CampaignsDenied says why no campaigns are shown: the user may not list them (a site
	// operator).
	CampaignsDenied string
}

// valueCount is how many sites have a value, and the site list showing them.
type valueCount struct {
	Value string
	Count int
	Link  string
}

func (s *Server) loadOverview(ctx context.Context, req *request) (any, error) {
	ns := req.Namespace
	sites, err := s.listVisibleSites(ctx, req, ns)
	if err != nil {
		return nil, err
	}
	campaigns := &fleetv1.CampaignList{}
	allowed, reason, err := s.cfg.Auth.AuthorizeAccess(ctx, req.User, fleetAccess("list", "campaigns", ns, ""))
	if err != nil {
		return nil, fmt.Errorf("check whether %s may list campaigns: %w", req.User.Name, err)
	}
	if allowed {
		if err := s.cfg.Cache.List(ctx, campaigns, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("list campaigns: %w", err)
		}
	}
	d := summarize(ns, sites, campaigns.Items)
	if !allowed {
		d.CampaignsDenied = fmt.Sprintf("%s may not list campaigns: %s", req.User.Name, reason)
	}
	return d, nil
}

// summarize counts sites by state, release and version, and picks the running campaigns and
// the recent problems.
func summarize(ns string, sites []fleetv1.Site, campaigns []fleetv1.Campaign) overviewData {
	d := overviewData{Total: len(sites)}
	states := map[SiteState]int{}
	releases, versions := map[string]int{}, map[string]int{}
	for i := range sites {
		r := newSiteRow(&sites[i])
		states[r.Status.State]++
		releases[r.Release]++
		versions[r.Version]++
		if r.Status.State == StateDegraded || r.Status.State == StateUnreachable {
			d.Problems = append(d.Problems, r)
		}
	}
	list := func(change func(*listQuery)) string {
		return siteTable{Query: listQuery{Namespace: ns, Sort: "name", Page: 1, Size: defaultPageSize}}.Link(change)
	}
	for _, st := range siteStates {
		d.States = append(d.States, valueCount{Value: string(st), Count: states[st], Link: list(func(q *listQuery) { q.State = st })})
	}
	d.Releases = counted(releases, "(none)", func(v string) string { return list(func(q *listQuery) { q.Release = v }) })
	d.Versions = counted(versions, "(not reported)", func(v string) string { return list(func(q *listQuery) { q.Version = v }) })

	d.ProblemCount = len(d.Problems)
	slices.SortFunc(d.Problems, func(a, b siteRow) int {
		return cmp.Or(b.Status.Since.Compare(a.Status.Since), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	d.Problems = d.Problems[:min(len(d.Problems), maxProblems)]

	for i := range campaigns {
		r := newCampaignRow(&campaigns[i])
		if r.Final {
			d.Ended = append(d.Ended, r)
		} else {
			d.Running = append(d.Running, r)
		}
	}
	slices.SortFunc(d.Running, func(a, b campaignRow) int { return cmp.Or(a.Started.Compare(b.Started), cmp.Compare(a.Name, b.Name)) })
	slices.SortFunc(d.Ended, func(a, b campaignRow) int {
		return cmp.Or(b.Completed.Compare(a.Completed), cmp.Compare(a.Name, b.Name))
	})
	d.Ended = d.Ended[:min(len(d.Ended), maxEnded)]
	return d
}

// counted lists a count per value, most common first; the empty value is called none.
func counted(counts map[string]int, none string, link func(string) string) []valueCount {
	out := make([]valueCount, 0, len(counts))
	for v, n := range counts {
		vc := valueCount{Value: v, Count: n}
		if v == "" {
			vc.Value = none
		} else {
			vc.Link = link(v)
		}
		out = append(out, vc)
	}
	slices.SortFunc(out, func(a, b valueCount) int { return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Value, b.Value)) })
	return out
}
