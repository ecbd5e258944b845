package sitelogapi

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/problem"
)

// DefaultTailLines is how many lines are asked for when tailLines is not given.
const DefaultTailLines = 200

// Query is what a caller asks for: a component, how many of its newest lines, and from when.
type Query struct {
	// Component is sitev1.LogComponentLocalController or sitev1.LogComponentBPA.
	Component string
	// TailLines is 1..sitev1.MaxLogLines.
	TailLines int32
	// SinceTime, when set, leaves out lines logged at or before it (to the nanosecond: a
	// follower passes the "ts" of the newest line it has and gets each line once).
	SinceTime *time.Time
}

// ParseQuery reads the query parameters component (default local-controller), tailLines
// (default 200, at most sitev1.MaxLogLines), and at most one of sinceSeconds (a positive
// integer) and sinceTime (RFC 3339); now turns sinceSeconds into a time. Errors are 400
// *problem.Problem naming the parameter and what it may be.
func ParseQuery(v url.Values, now time.Time) (Query, error) {
	q := Query{Component: sitev1.LogComponentLocalController, TailLines: DefaultTailLines}
	for key := range v {
		switch key {
		case "component", "tailLines", "sinceSeconds", "sinceTime":
		default:
			return q, problem.New(http.StatusBadRequest, key, "unknown query parameter %q: the parameters are component, tailLines, sinceSeconds and sinceTime", key)
		}
	}
	if c := v.Get("component"); c != "" {
		if c != sitev1.LogComponentLocalController && c != sitev1.LogComponentBPA {
			return q, problem.New(http.StatusBadRequest, "component", "component %q: must be %s or %s", c, sitev1.LogComponentLocalController, sitev1.LogComponentBPA)
		}
		q.Component = c
	}
	if s := v.Get("tailLines"); s != "" {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || n < 1 || n > sitev1.MaxLogLines {
			return q, problem.New(http.StatusBadRequest, "tailLines", "tailLines %q: must be a whole number from 1 to %d", s, sitev1.MaxLogLines)
		}
		q.TailLines = int32(n)
	}
	secs, at := v.Get("sinceSeconds"), v.Get("sinceTime")
	switch {
	case secs != "" && at != "":
		return q, problem.New(http.StatusBadRequest, "sinceTime", "give sinceSeconds or sinceTime, not both")
	case secs != "":
		n, err := strconv.ParseInt(secs, 10, 64)
		if err != nil || n < 1 || n > int64(maxSince/time.Second) {
			return q, problem.New(http.StatusBadRequest, "sinceSeconds", "sinceSeconds %q: must be a whole number of seconds from 1 to %d", secs, int64(maxSince/time.Second))
		}
		t := now.Add(-time.Duration(n) * time.Second)
		q.SinceTime = &t
	case at != "":
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return q, problem.New(http.StatusBadRequest, "sinceTime", "sinceTime %q: must be an RFC 3339 time, e.g. 2026-11-24T18:00:00.123456789Z", at)
		}
		q.SinceTime = &t
	}
	return q, nil
}

// maxSince bounds sinceSeconds: a year, far beyond what any component keeps.
const maxSince = 366 * 24 * time.Hour

// Values is q as query parameters (the CLI's request).
func (q Query) Values() url.Values {
	v := url.Values{"component": {q.Component}, "tailLines": {strconv.Itoa(int(q.TailLines))}}
	if q.SinceTime != nil {
		v.Set("sinceTime", q.SinceTime.UTC().Format(time.RFC3339Nano))
	}
	return v
}
