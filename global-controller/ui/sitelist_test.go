package ui

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

func TestParseListQuery(t *testing.T) {
	cases := []struct {
		query   string
		want    listQuery
		wantErr string
	}{
		{query: "", want: listQuery{Sort: "name", Page: 1, Size: defaultPageSize}},
		{query: "namespace=fleet&q=+eu-&state=Degraded&release=r1&version=v1.36.3&sort=heartbeat&order=desc&page=3&size=20",
			want: listQuery{Namespace: "fleet", Search: "eu-", State: StateDegraded, Release: "r1", Version: "v1.36.3", Sort: "heartbeat", Desc: true, Page: 3, Size: 20}},
		{query: "state=Failed", wantErr: "state: must be one of"},
		{query: "sort=color", wantErr: "sort: must be one of"},
		{query: "order=up", wantErr: "order: must be asc or desc"},
		{query: "page=0", wantErr: "page: must be a whole number"},
		{query: "page=x", wantErr: "page: must be a whole number"},
		{query: "size=501", wantErr: "size: must be a whole number from 1 to 500"},
		{query: "q=" + strings.Repeat("a", 101), wantErr: "q: at most 100 characters"},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			v, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := parseListQuery(v)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseListQuery = %+v, %v; want %+v", got, err, tc.want)
			}
			// What values() writes reads back the same.
			back, err := parseListQuery(got.values())
			if err != nil || back != got {
				t.Errorf("round trip through %q = %+v, %v", got.values().Encode(), back, err)
			}
		})
	}
}

// fleetOf builds n sites: every third one unreachable, every fifth in region eu-west, release
// r<i%2>, heartbeat i minutes after t0.
func fleetOf(n int) []fleetv1.Site {
	sites := make([]fleetv1.Site, n)
	for i := range sites {
		s := site(func(s *fleetv1.Site) {
			s.Name = fmt.Sprintf("store-%05d", i)
			s.Spec.Cluster.Release = fmt.Sprintf("r%d", i%2)
			s.Spec.Location = &fleetv1.Location{Region: "us-east"}
			if i%5 == 0 {
				s.Spec.Location.Region = "eu-west"
			}
			hb := metav1.NewTime(t0.Add(time.Duration(i) * time.Minute))
			s.Status.LastHeartbeatTime = &hb
		})
		if i%3 == 0 {
			setCond(cond(fleetv1.SiteReachableCondition, metav1.ConditionFalse, fleetv1.ReasonAPIServerUnreachable, 0))(s)
		}
		sites[i] = *s
	}
	return sites
}

func TestSelectSites(t *testing.T) {
	sites := fleetOf(30)
	names := func(p siteTable) []string {
		var out []string
		for _, r := range p.Rows {
			out = append(out, strings.TrimPrefix(r.Name, "store-000"))
		}
		return out
	}
	cases := []struct {
		name             string
		query            listQuery
		wantNames        []string
		wantMatched      int
		wantPages, wantN int // wantN: the page shown
	}{
		{name: "first page by name", query: listQuery{Sort: "name", Page: 1, Size: 4},
			wantNames: []string{"00", "01", "02", "03"}, wantMatched: 30, wantPages: 8, wantN: 1},
		{name: "last page is short", query: listQuery{Sort: "name", Page: 8, Size: 4},
			wantNames: []string{"28", "29"}, wantMatched: 30, wantPages: 8, wantN: 8},
		{name: "a page past the end shows the last", query: listQuery{Sort: "name", Page: 99, Size: 4},
			wantNames: []string{"28", "29"}, wantMatched: 30, wantPages: 8, wantN: 8},
		{name: "by name, descending", query: listQuery{Sort: "name", Desc: true, Page: 1, Size: 3},
			wantNames: []string{"29", "28", "27"}, wantMatched: 30, wantPages: 10, wantN: 1},
		{name: "unreachable only", query: listQuery{Sort: "name", State: StateUnreachable, Page: 1, Size: 50},
			wantNames: []string{"00", "03", "06", "09", "12", "15", "18", "21", "24", "27"}, wantMatched: 10, wantPages: 1, wantN: 1},
		{name: "problems first, then by name", query: listQuery{Sort: "state", Page: 1, Size: 3},
			wantNames: []string{"00", "03", "06"}, wantMatched: 30, wantPages: 10, wantN: 1},
		{name: "search the region, case-insensitively", query: listQuery{Sort: "name", Search: "EU-W", Page: 1, Size: 50},
			wantNames: []string{"00", "05", "10", "15", "20", "25"}, wantMatched: 6, wantPages: 1, wantN: 1},
		{name: "release and search together", query: listQuery{Sort: "name", Search: "eu-", Release: "r1", Page: 1, Size: 50},
			wantNames: []string{"05", "15", "25"}, wantMatched: 3, wantPages: 1, wantN: 1},
		{name: "newest heartbeat first", query: listQuery{Sort: "heartbeat", Desc: true, Page: 1, Size: 2},
			wantNames: []string{"29", "28"}, wantMatched: 30, wantPages: 15, wantN: 1},
		{name: "no match", query: listQuery{Sort: "name", Version: "v9.9.9", Page: 1, Size: 50},
			wantMatched: 0, wantPages: 1, wantN: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := selectSites(sites, tc.query)
			if got := names(p); !slices.Equal(got, tc.wantNames) || p.Matched != tc.wantMatched || p.Pages != tc.wantPages || p.Query.Page != tc.wantN {
				t.Errorf("got %v (matched %d, page %d of %d); want %v (matched %d, page %d of %d)",
					got, p.Matched, p.Query.Page, p.Pages, tc.wantNames, tc.wantMatched, tc.wantN, tc.wantPages)
			}
		})
	}
}

func TestSortLink(t *testing.T) {
	p := siteTable{Query: listQuery{Namespace: "fleet", Sort: "name", Page: 4, Size: defaultPageSize}}
	if got, want := p.SortLink("name"), "/ui/sites?namespace=fleet&order=desc"; got != want {
		t.Errorf("SortLink(name) on a list sorted by name = %q, want %q (reversed, first page)", got, want)
	}
	if got, want := p.SortLink("state"), "/ui/sites?namespace=fleet&sort=state"; got != want {
		t.Errorf("SortLink(state) = %q, want %q", got, want)
	}
	if got, want := p.PageLink(5), "/ui/sites?namespace=fleet&page=5"; got != want {
		t.Errorf("PageLink(5) = %q, want %q", got, want)
	}
}

// BenchmarkSelectSites pages 10,000 sites, sorted by state, with a search: the work of one
// site list request, without the HTTP around it.
func BenchmarkSelectSites(b *testing.B) {
	sites := fleetOf(10000)
	q := listQuery{Sort: "state", Search: "us-", Page: 7, Size: defaultPageSize}
	for b.Loop() {
		if p := selectSites(sites, q); len(p.Rows) != defaultPageSize {
			b.Fatalf("%d rows", len(p.Rows))
		}
	}
}
