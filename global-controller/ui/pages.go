package ui

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgefleet/edgefleet/pkg/kubeauth"
)

// request is what a page is asked for, by whom.
type request struct {
	User kubeauth.User
	// Namespace and Name are the path's (a site's or a campaign's page), or Namespace the
	// query's (lists).
	Namespace, Name string
	Query           url.Values
	// Token is the user's bearer token, for reviews only the user may ask (SiteRules).
	Token string
}

// page is one page of the UI: its template, how its data is loaded (and access checked), and
// which changes make its live part stale.
type page struct {
	template string
	title    func(*request) string
	load     func(s *Server, ctx context.Context, req *request) (any, error)
	watch    func(req *request) func(Change) bool
	// refresh, when set, renders a live page again this often whether or not anything it
	// watches changed (what it shows changes without informer events: the artifact store).
	refresh time.Duration
}

// page serves p: the whole page, or, to an EventSource (Accept: text/event-stream), a stream
// of its live part.
func (s *Server) page(p page) gin.HandlerFunc {
	return func(c *gin.Context) {
		req := &request{User: c.MustGet(userKey).(kubeauth.User), Query: c.Request.URL.Query(), Namespace: c.Param("namespace"), Name: c.Param("name"),
			Token: c.MustGet(tokenKey).(string)}
		if req.Name == "" {
			req.Namespace = req.Query.Get("namespace")
		}
		c.Header("Vary", "Accept")
		if wantsStream(c.Request) {
			s.stream(c, p, req, c.MustGet(tokenKey).(string))
			return
		}
		ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.Limits.RequestTimeout)
		defer cancel()
		data, err := p.load(s, ctx, req)
		if err != nil {
			s.fail(c, err)
			return
		}
		body, err := s.render(p.template, false, s.view(p, req, c.Request.URL.Path, data))
		if err != nil {
			s.fail(c, err)
			return
		}
		c.Data(http.StatusOK, "text/html; charset=utf-8", body)
	}
}

func (s *Server) view(p page, req *request, path string, data any) view {
	return view{Title: p.title(req), User: req.User.Name, Namespace: req.Namespace, Path: path, Now: s.cfg.Clock.Now(), Data: data}
}

// wantsStream tells an EventSource's request, which accepts text/event-stream.
func wantsStream(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// inNamespace matches changes in namespace ns ("" for all) of the given kinds.
func inNamespace(ns string, kinds ...string) func(Change) bool {
	return func(ch Change) bool {
		if ns != "" && ch.Namespace != ns {
			return false
		}
		for _, k := range kinds {
			if ch.Kind == k {
				return true
			}
		}
		return false
	}
}
