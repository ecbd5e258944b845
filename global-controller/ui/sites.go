package ui

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/index"
	"github.com/edgefleet/edgefleet/global-controller/kubeconfigapi"
	"github.com/edgefleet/edgefleet/global-controller/sitelogapi"
)

// Events on a site's page.
const (
	// maxEventsRead bounds the Events read for one site page.
	maxEventsRead = 500
	// maxEventsShown is how many of them the page shows, newest first.
	maxEventsShown = 50
)

var siteListPage = page{
	template: "sites",
	title:    func(*request) string { return "Sites" },
	load:     (*Server).loadSiteList,
	watch:    func(req *request) func(Change) bool { return inNamespace(req.Namespace, KindSite) },
}

var sitePage = page{
	template: "site",
	title:    func(req *request) string { return "Site " + req.Name },
	load:     (*Server).loadSite,
	watch: func(req *request) func(Change) bool {
		return func(ch Change) bool {
			return ch.Namespace == req.Namespace && (ch.Kind == KindSite && ch.Name == req.Name || ch.Kind == KindHost && ch.Site == req.Name)
		}
	},
}

func (s *Server) loadSiteList(ctx context.Context, req *request) (any, error) {
	q, err := parseListQuery(req.Query)
	if err != nil {
		return nil, &httpError{status: http.StatusBadRequest, msg: err.Error()}
	}
	sites, err := s.listVisibleSites(ctx, req, q.Namespace)
	if err != nil {
		return nil, err
	}
	return selectSites(sites, q), nil
}

// siteData is everything a site's page shows.
type siteData struct {
	Site *fleetv1.Site
	Row  siteRow
	// Conditions, those that are not True first.
	Conditions []metav1.Condition
	// Hosts of the site, control plane first; HostsDenied says why they are not shown.
	Hosts       []hostRow
	HostsDenied string
	// History is the operations' events; Events all of the site's, newest first.
	// EventsProblem says why they are missing or cut short.
	History, Events []eventRow
	EventsProblem   string
	// KubeconfigURL is where the user gets a kubeconfig of the site's application cluster;
	// empty unless the site has one and the user may (create sites/kubeconfig).
	KubeconfigURL string
	// LogURL is where the Logs panel reads the site components' logs; empty unless the user may
	// (get sites/log).
	LogURL string
}

// hostRow is one host of a site.
type hostRow struct {
	Name, Role, BootMAC, BMC string
	// Cluster is what the site reports of the host (nil: nothing yet).
	Cluster *fleetv1.HostClusterStatus
	// Problems are the host's conditions that are not True.
	Problems []metav1.Condition
}

// eventRow is one Event about the site.
type eventRow struct {
	Time                       time.Time
	Type, Reason, Action, Note string
	Count                      int32
	ReportingController        string
}

func (s *Server) loadSite(ctx context.Context, req *request) (any, error) {
	ns, name := req.Namespace, req.Name
	if err := s.authorize(ctx, req.User, fleetAccess("get", "sites", ns, name)); err != nil {
		return nil, err
	}
	site := &fleetv1.Site{}
	if err := s.cfg.Cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, site); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &httpError{status: http.StatusNotFound, msg: fmt.Sprintf("site %q not found in namespace %q", name, ns)}
		}
		return nil, fmt.Errorf("get site %s/%s: %w", ns, name, err)
	}
	d := &siteData{Site: site, Row: newSiteRow(site), Conditions: problemsFirst(site.Status.Conditions)}
	if s.allowed(ctx, req.User, fleetAccess("list", "hosts", ns, "")) {
		hosts, err := s.siteHosts(ctx, ns, name)
		if err != nil {
			return nil, err
		}
		d.Hosts = hosts
	} else {
		d.HostsDenied = fmt.Sprintf("%s may not list hosts in namespace %s", req.User.Name, ns)
	}
	d.Events, d.EventsProblem = s.siteEvents(ctx, ns, name)
	if s.cfg.Kubeconfigs != nil && site.Spec.Cluster != nil && s.allowed(ctx, req.User, kubeconfigapi.Grant(ns, name)) {
		d.KubeconfigURL = objectURL("sites", ns, name) + "/kubeconfig"
	}
	if s.cfg.Logs != nil && s.allowed(ctx, req.User, sitelogapi.Grant(ns, name)) {
		d.LogURL = objectURL("sites", ns, name) + "/log"
	}
	for _, e := range d.Events {
		if strings.HasPrefix(e.Reason, "Operation") {
			d.History = append(d.History, e)
		}
	}
	d.Events = d.Events[:min(len(d.Events), maxEventsShown)]
	return d, nil
}

func (s *Server) siteHosts(ctx context.Context, ns, site string) ([]hostRow, error) {
	list := &fleetv1.HostList{}
	if err := s.cfg.Cache.List(ctx, list, client.InNamespace(ns), client.MatchingFields{index.HostSite: index.Key(ns, site)}); err != nil {
		return nil, fmt.Errorf("list hosts of site %s/%s: %w", ns, site, err)
	}
	rows := make([]hostRow, 0, len(list.Items))
	for i := range list.Items {
		h := &list.Items[i]
		r := hostRow{Name: h.Name, Role: string(h.Spec.Role), BootMAC: h.Spec.BootMACAddress, BMC: h.Spec.BMC.Address, Cluster: h.Status.Cluster}
		for _, c := range h.Status.Conditions {
			if c.Status != metav1.ConditionTrue {
				r.Problems = append(r.Problems, c)
			}
		}
		rows = append(rows, r)
	}
	workersLast := func(r hostRow) int {
		if r.Role == string(fleetv1.RoleControlPlane) {
			return 0
		}
		return 1
	}
	slices.SortFunc(rows, func(a, b hostRow) int {
		return cmp.Or(cmp.Compare(workersLast(a), workersLast(b)), cmp.Compare(a.Name, b.Name))
	})
	return rows, nil
}

// siteEvents reads the Events about the site from the API server (they are not cached),
// newest first; problem says why there are none or fewer than there are.
func (s *Server) siteEvents(ctx context.Context, ns, site string) (rows []eventRow, problem string) {
	list := &eventsv1.EventList{}
	err := s.cfg.Events.List(ctx, list, client.InNamespace(ns), client.Limit(maxEventsRead),
		client.MatchingFields{"regarding.kind": "Site", "regarding.name": site})
	if err != nil {
		s.cfg.Log.Error(err, "list events", "site", ns+"/"+site)
		return nil, "the events could not be read: " + err.Error()
	}
	if list.Continue != "" {
		problem = fmt.Sprintf("only the first %d events were read", maxEventsRead)
	}
	for i := range list.Items {
		e := &list.Items[i]
		r := eventRow{Time: e.EventTime.Time, Type: e.Type, Reason: e.Reason, Action: e.Action, Note: e.Note, Count: 1, ReportingController: e.ReportingController}
		if e.Series != nil {
			r.Time, r.Count = e.Series.LastObservedTime.Time, e.Series.Count
		}
		if r.Time.IsZero() {
			r.Time = e.DeprecatedLastTimestamp.Time
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b eventRow) int { return b.Time.Compare(a.Time) })
	return rows, problem
}

// problemsFirst orders conditions False, then Unknown, then True, each by type.
func problemsFirst(conds []metav1.Condition) []metav1.Condition {
	rank := map[metav1.ConditionStatus]int{metav1.ConditionFalse: 0, metav1.ConditionUnknown: 1, metav1.ConditionTrue: 2}
	out := slices.Clone(conds)
	slices.SortStableFunc(out, func(a, b metav1.Condition) int { return cmp.Compare(rank[a.Status], rank[b.Status]) })
	return out
}
