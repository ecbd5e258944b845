package ui

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"k8s.io/apimachinery/pkg/types"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/global-controller/problem"
	"github.com/edgefleet/edgefleet/global-controller/sitelogapi"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
	"github.com/edgefleet/edgefleet/pkg/logline"
)

// siteLogAnswer is what the Logs panel's script (static/logs.js) gets: the component's answer
// with each line rendered as the CLI renders it (logline), which the script shows as text.
type siteLogAnswer struct {
	Component string      `json:"component"`
	Instance  string      `json:"instance"`
	Since     *time.Time  `json:"since,omitempty"`
	Truncated bool        `json:"truncated"`
	Lines     []shownLine `json:"lines"`
	// Newest is the sinceTime of the next follow request: the newest line's time, else the
	// request's own sinceTime, else the server's time now.
	Newest string `json:"newest,omitempty"`
}

// shownLine is one rendered line and its level (for its colour).
type shownLine struct {
	Text  string `json:"text"`
	Level string `json:"level,omitempty"`
}

// siteLog answers the site page's Logs panel with a site component's recent log lines for the
// signed-in user: the same parameters and checks as the REST endpoint (sitelogapi: a fresh
// SubjectAccessReview of get sites/log, a LogRequest on the site), errors in its JSON.
func (s *Server) siteLog(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	if s.cfg.Logs == nil {
		c.JSON(http.StatusNotFound, restv1.Error{Message: "this server shows no site logs"})
		return
	}
	u := c.MustGet(userKey).(kubeauth.User)
	q, err := sitelogapi.ParseQuery(c.Request.URL.Query(), s.cfg.Clock.Now())
	var log restv1.SiteLog
	if err == nil {
		log, err = s.cfg.Logs.Logs(c.Request.Context(), u, types.NamespacedName{Namespace: c.Param("namespace"), Name: c.Param("name")}, q)
	}
	if err != nil {
		p := problem.Of(err)
		c.JSON(p.Status, restv1.Error{Message: p.Message, Field: p.Field})
		return
	}
	out := siteLogAnswer{Component: log.Component, Instance: log.Instance, Since: log.Since, Truncated: log.Truncated, Lines: make([]shownLine, 0, len(log.Lines))}
	newest := s.cfg.Clock.Now()
	if q.SinceTime != nil {
		newest = *q.SinceTime
	}
	out.Newest = newest.UTC().Format(time.RFC3339Nano)
	for _, l := range log.Lines {
		e := logline.Parse(l)
		if !e.Time.IsZero() {
			out.Newest = e.Time.UTC().Format(time.RFC3339Nano)
		}
		out.Lines = append(out.Lines, shownLine{Text: e.Render(), Level: e.Level})
	}
	c.JSON(http.StatusOK, out)
}
