package ui

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

// Site list paging.
const (
	defaultPageSize = 50
	maxPageSize     = 500
	maxSearchLength = 100
)

// sortKeys are the columns the site list sorts by.
var sortKeys = []string{"name", "state", "release", "version", "region", "heartbeat", "operation"}

// listQuery is what the site list shows: the query string of /ui/sites, checked.
type listQuery struct {
	// Namespace of the sites; "" for every namespace.
	Namespace string
	// Search is matched, case-insensitively, against the name, region, zone, release and
	// Kubernetes version of each site.
	Search string
	// State keeps only the sites in this state; "" keeps all.
	State SiteState
	// Release and Version keep only the sites of this spec.cluster.release, and whose cluster
	// reports this Kubernetes version; "" keeps all.
	Release, Version string
	// Sort is one of sortKeys; Desc reverses it. Ties go by namespace and name.
	Sort string
	Desc bool
	// Page counts from 1; Size sites per page.
	Page, Size int
}

// parseListQuery reads the site list's query parameters (namespace, q, state, sort, order,
// page, size), naming the first that is wrong.
func parseListQuery(v url.Values) (listQuery, error) {
	q := listQuery{Namespace: v.Get("namespace"), Search: strings.TrimSpace(v.Get("q")), Release: v.Get("release"), Version: v.Get("version"),
		Sort: "name", Page: 1, Size: defaultPageSize}
	if len(q.Search) > maxSearchLength {
		return q, fmt.Errorf("q: at most %d characters, got %d", maxSearchLength, len(q.Search))
	}
	if s := v.Get("state"); s != "" {
		if !slices.Contains(siteStates, SiteState(s)) {
			return q, fmt.Errorf("state: must be one of %v, got %q", siteStates, s)
		}
		q.State = SiteState(s)
	}
	if s := v.Get("sort"); s != "" {
		if !slices.Contains(sortKeys, s) {
			return q, fmt.Errorf("sort: must be one of %v, got %q", sortKeys, s)
		}
		q.Sort = s
	}
	switch o := v.Get("order"); o {
	case "", "asc":
	case "desc":
		q.Desc = true
	default:
		return q, fmt.Errorf("order: must be asc or desc, got %q", o)
	}
	for _, p := range []struct {
		name string
		to   *int
		max  int
	}{{"page", &q.Page, 1 << 30}, {"size", &q.Size, maxPageSize}} {
		s := v.Get(p.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > p.max {
			return q, fmt.Errorf("%s: must be a whole number from 1 to %d, got %q", p.name, p.max, s)
		}
		*p.to = n
	}
	return q, nil
}

// values is the query string that shows q.
func (q listQuery) values() url.Values {
	v := url.Values{}
	set := func(k, val, def string) {
		if val != def {
			v.Set(k, val)
		}
	}
	set("namespace", q.Namespace, "")
	set("q", q.Search, "")
	set("state", string(q.State), "")
	set("release", q.Release, "")
	set("version", q.Version, "")
	set("sort", q.Sort, "name")
	if q.Desc {
		v.Set("order", "desc")
	}
	set("page", strconv.Itoa(q.Page), "1")
	set("size", strconv.Itoa(q.Size), strconv.Itoa(defaultPageSize))
	return v
}

// siteRow is one site's line in the lists.
type siteRow struct {
	Namespace, Name string
	Status          siteStatus
	Region, Zone    string
	// Release is spec.cluster.release; Version the Kubernetes version the cluster reports.
	Release, Version string
	Hosts            int32
	// Operation is the last operation's phase and campaign ("" when none).
	Operation, Campaign string
	Heartbeat           time.Time
}

func newSiteRow(s *fleetv1.Site) siteRow {
	r := siteRow{Namespace: s.Namespace, Name: s.Name, Status: classify(s), Hosts: s.Status.Hosts.Total, Heartbeat: timeOf(s.Status.LastHeartbeatTime)}
	if l := s.Spec.Location; l != nil {
		r.Region, r.Zone = l.Region, l.Zone
	}
	if c := s.Spec.Cluster; c != nil {
		r.Release = c.Release
	}
	if c := s.Status.Cluster; c != nil {
		r.Version = c.KubernetesVersion
	}
	if op := s.Status.LastOperation; op != nil {
		r.Operation, r.Campaign = string(op.Phase), op.Campaign
	}
	return r
}

// matches reports whether the row contains search (lower-cased) in one of its words.
func (r *siteRow) matches(search string) bool {
	for _, f := range []string{r.Name, r.Region, r.Zone, r.Release, r.Version} {
		if strings.Contains(strings.ToLower(f), search) {
			return true
		}
	}
	return false
}

// stateRank orders states problems first.
func stateRank(s SiteState) int {
	switch s {
	case StateDegraded:
		return 0
	case StateUnreachable:
		return 1
	case StateProvisioning:
		return 2
	case StateNotChecked:
		return 3
	default:
		return 4
	}
}

// compareRows compares by the sort key, then namespace and name.
func compareRows(key string) func(a, b *siteRow) int {
	by := map[string]func(a, b *siteRow) int{
		"name":      func(*siteRow, *siteRow) int { return 0 },
		"state":     func(a, b *siteRow) int { return cmp.Compare(stateRank(a.Status.State), stateRank(b.Status.State)) },
		"release":   func(a, b *siteRow) int { return cmp.Compare(a.Release, b.Release) },
		"version":   func(a, b *siteRow) int { return cmp.Compare(a.Version, b.Version) },
		"region":    func(a, b *siteRow) int { return cmp.Compare(a.Region, b.Region) },
		"heartbeat": func(a, b *siteRow) int { return a.Heartbeat.Compare(b.Heartbeat) },
		"operation": func(a, b *siteRow) int { return cmp.Compare(a.Operation, b.Operation) },
	}[key]
	return func(a, b *siteRow) int {
		return cmp.Or(by(a, b), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	}
}

// siteTable is one page of the site list.
type siteTable struct {
	Query listQuery
	Rows  []siteRow
	// Matched is how many sites match the filters; Pages how many pages they fill.
	Matched, Pages int
}

// selectSites filters, sorts and pages sites as q says; a page past the end shows the last.
func selectSites(sites []fleetv1.Site, q listQuery) siteTable {
	search := strings.ToLower(q.Search)
	rows := make([]*siteRow, 0, len(sites))
	for i := range sites {
		r := newSiteRow(&sites[i])
		if q.State != "" && r.Status.State != q.State || q.Release != "" && r.Release != q.Release ||
			q.Version != "" && r.Version != q.Version || search != "" && !r.matches(search) {
			continue
		}
		rows = append(rows, &r)
	}
	compare := compareRows(q.Sort)
	if q.Desc {
		asc := compare
		compare = func(a, b *siteRow) int { return asc(b, a) }
	}
	slices.SortFunc(rows, compare)
	p := siteTable{Query: q, Matched: len(rows), Pages: max(1, (len(rows)+q.Size-1)/q.Size)}
	p.Query.Page = min(q.Page, p.Pages)
	start := (p.Query.Page - 1) * q.Size
	for _, r := range rows[start:min(start+q.Size, len(rows))] {
		p.Rows = append(p.Rows, *r)
	}
	return p
}

// Link is the site list's URL with one change to the query.
func (p siteTable) Link(change func(*listQuery)) string {
	q := p.Query
	change(&q)
	return "/ui/sites?" + q.values().Encode()
}

// PageLink is the URL of page n.
func (p siteTable) PageLink(n int) string { return p.Link(func(q *listQuery) { q.Page = n }) }

// SortLink is the URL sorted by key: ascending, or reversed when it is sorted by key already.
func (p siteTable) SortLink(key string) string {
	return p.Link(func(q *listQuery) {
		q.Desc = q.Sort == key && !q.Desc
		q.Sort, q.Page = key, 1
	})
}

// column is one column of the site table; Key is its sort key ("" when it does not sort).
type column struct{ Key, Label string }

// Columns are the site table's columns.
func (siteTable) Columns() []column {
	return []column{{"name", "Site"}, {"state", "State"}, {"", "Why"}, {"release", "Release"}, {"version", "Kubernetes"},
		{"region", "Region"}, {"", "Hosts"}, {"operation", "Last operation"}, {"heartbeat", "Heartbeat"}}
}

// States are the states the list filters by.
func (siteTable) States() []SiteState { return siteStates }
