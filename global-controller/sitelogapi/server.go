package sitelogapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/problem"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
	"github.com/edgefleet/edgefleet/pkg/logline"
	"github.com/edgefleet/edgefleet/pkg/siteclient"
)

// Route is the endpoint's path, and Path its http.ServeMux pattern (GET, and so HEAD).
const (
	Route = "/api/v1/namespaces/{namespace}/sites/{site}/log"
	Path  = http.MethodGet + " " + Route
)

// DefaultWait is how long the server waits for the component's answer when Server.Wait is zero.
const DefaultWait = 15 * time.Second

// Auth checks callers: the bearer token (Middleware) and, on every request and never from a
// cache, the grant (AuthorizeAccessNow). *kubeauth.Reviewer in production.
type Auth interface {
	Middleware(next http.Handler) http.Handler
	AuthorizeAccessNow(ctx context.Context, u kubeauth.User, a kubeauth.Access) (bool, string, error)
}

// Sites gives the client of a site, by its Site's namespaced name (a *siteclient.Cache).
type Sites interface {
	Client(site types.NamespacedName) (client.Client, error)
}

// Server answers the log viewer's requests.
type Server struct {
	// Auth authenticates and authorizes callers.
	Auth Auth
	// Reader reads Sites from the global cluster.
	Reader client.Reader
	// Sites reaches the sites' clusters.
	Sites Sites
	// Clock turns sinceSeconds into a time.
	Clock clock.PassiveClock
	// Wait bounds the wait for the component's answer; DefaultWait when zero.
	Wait time.Duration
	// Poll is how often the answer is looked for; siteclient.DefaultPoll when zero.
	Poll time.Duration
}

// Grant is the access a user needs to read the logs of a Site's components.
func Grant(namespace, site string) kubeauth.Access {
	return kubeauth.Access{Verb: "get", Group: fleetv1.GroupVersion.Group, Resource: "sites/log", Namespace: namespace, Name: site}
}

// Handler returns the endpoint's handler, authenticating callers with Auth's middleware.
func (s *Server) Handler() http.Handler {
	return s.Auth.Middleware(http.HandlerFunc(s.serve))
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	log, err := s.logOf(r)
	if err != nil {
		problem.Write(w, err)
		return
	}
	problem.WriteJSON(w, http.StatusOK, log)
}

func (s *Server) logOf(r *http.Request) (restv1.SiteLog, error) {
	u, ok := kubeauth.UserFrom(r.Context())
	if !ok {
		return restv1.SiteLog{}, problem.New(http.StatusUnauthorized, "Authorization", "no authenticated user")
	}
	q, err := ParseQuery(r.URL.Query(), s.Clock.Now())
	if err != nil {
		return restv1.SiteLog{}, err
	}
	return s.Logs(r.Context(), u, types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("site")}, q)
}

// Logs gives u the recent log lines q asks for of Site key's component, when u may read them:
// the grant (a fresh SubjectAccessReview), the Site, then the component's answer through a
// LogRequest on the site. Errors are *problem.Problem; the web UI calls it for its users.
func (s *Server) Logs(ctx context.Context, u kubeauth.User, key types.NamespacedName, q Query) (restv1.SiteLog, error) {
	access := Grant(key.Namespace, key.Name)
	allowed, reason, err := s.Auth.AuthorizeAccessNow(ctx, u, access)
	if err != nil {
		return restv1.SiteLog{}, problem.New(http.StatusServiceUnavailable, "", "cannot check permissions with the API server now: %v", err)
	}
	if !allowed {
		return restv1.SiteLog{}, problem.New(http.StatusForbidden, "", "user %q may not read the logs of site %s (%s): %s", u.Name, key, access, reason)
	}
	site := &fleetv1.Site{}
	if err := s.Reader.Get(ctx, key, site); apierrors.IsNotFound(err) {
		return restv1.SiteLog{}, problem.New(http.StatusNotFound, "", "there is no Site %s", key)
	} else if err != nil {
		return restv1.SiteLog{}, fmt.Errorf("read Site %s: %w", key, err)
	}
	siteClient, err := s.Sites.Client(key)
	if err != nil {
		return restv1.SiteLog{}, problem.New(http.StatusServiceUnavailable, "", "site %s cannot be reached now: %v. %s", key, err, conditionsSay(site))
	}
	wait := s.Wait
	if wait <= 0 {
		wait = DefaultWait
	}
	lr := &sitev1.LogRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: sitev1.InfoNamespace, GenerateName: "log-"},
		Spec:       sitev1.LogRequestSpec{Component: q.Component, TailLines: q.TailLines},
	}
	if q.SinceTime != nil {
		lr.Spec.SinceTime = &metav1.MicroTime{Time: q.SinceTime.Truncate(time.Microsecond)}
	}
	err = siteclient.Ask(ctx, siteClient, lr, wait, s.Poll, func(lr *sitev1.LogRequest) bool { return lr.Status.Answered })
	switch {
	case errors.Is(err, siteclient.ErrNoAnswer):
		return restv1.SiteLog{}, problem.New(http.StatusGatewayTimeout, "", "the %s of site %s did not answer within %s: is it running? %s", q.Component, key, wait, conditionsSay(site))
	case err != nil:
		return restv1.SiteLog{}, problem.New(http.StatusServiceUnavailable, "", "site %s: %v. %s", key, err, conditionsSay(site))
	}
	return answer(q, lr.Status), nil
}

// answer is the component's answer as the wire type. The site compares times to the
// microsecond; lines at or before a sinceTime given to the nanosecond are left out here, so
// that a follower gets each line once.
func answer(q Query, st sitev1.LogRequestStatus) restv1.SiteLog {
	out := restv1.SiteLog{Component: q.Component, Instance: st.Instance, Truncated: st.Truncated, Lines: []string{}}
	if st.Since != nil {
		since := st.Since.UTC()
		out.Since = &since
	}
	for _, l := range st.Lines {
		if q.SinceTime != nil {
			if at := logline.Parse(l).Time; !at.IsZero() && !at.After(*q.SinceTime) {
				continue
			}
		}
		out.Lines = append(out.Lines, l)
	}
	return out
}

// conditionsSay is what the Site's reachability conditions say, for errors that tell the user
// where to look.
func conditionsSay(site *fleetv1.Site) string {
	var said []string
	for _, t := range []string{fleetv1.SiteKubeconfigValidCondition, fleetv1.SiteReachableCondition, fleetv1.SiteReadyCondition} {
		if c := meta.FindStatusCondition(site.Status.Conditions, t); c != nil {
			said = append(said, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
		}
	}
	if len(said) == 0 {
		return "The Site has no conditions yet: is the global controller running?"
	}
	return "The Site's conditions say: " + strings.Join(said, "; ")
}
