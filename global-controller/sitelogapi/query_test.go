package sitelogapi_test

import (
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/problem"
	"github.com/edgefleet/edgefleet/global-controller/sitelogapi"
)

func TestParseQuery(t *testing.T) {
	now := time.Date(2026, 11, 24, 18, 0, 0, 0, time.UTC)
	at := time.Date(2026, 11, 24, 17, 59, 1, 123456789, time.UTC)
	for _, tc := range []struct {
		query     string
		want      sitelogapi.Query
		wantField string
	}{
		{"", sitelogapi.Query{Component: sitev1.LogComponentLocalController, TailLines: 200}, ""},
		{"component=bpa&tailLines=2000", sitelogapi.Query{Component: sitev1.LogComponentBPA, TailLines: 2000}, ""},
		{"sinceSeconds=60", sitelogapi.Query{Component: sitev1.LogComponentLocalController, TailLines: 200, SinceTime: new(now.Add(-time.Minute))}, ""},
		{"sinceTime=2026-11-24T17:59:01.123456789Z", sitelogapi.Query{Component: sitev1.LogComponentLocalController, TailLines: 200, SinceTime: &at}, ""},
		{"component=kubelet", sitelogapi.Query{}, "component"},
		{"tailLines=0", sitelogapi.Query{}, "tailLines"},
		{"tailLines=2001", sitelogapi.Query{}, "tailLines"},
		{"tailLines=ten", sitelogapi.Query{}, "tailLines"},
		{"sinceSeconds=0", sitelogapi.Query{}, "sinceSeconds"},
		{"sinceTime=yesterday", sitelogapi.Query{}, "sinceTime"},
		{"sinceSeconds=5&sinceTime=2026-11-24T17:59:01Z", sitelogapi.Query{}, "sinceTime"},
		{"follow=true", sitelogapi.Query{}, "follow"},
	} {
		v, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sitelogapi.ParseQuery(v, now)
		if tc.wantField != "" {
			var p *problem.Problem
			if !errors.As(err, &p) || p.Status != http.StatusBadRequest || p.Field != tc.wantField {
				t.Errorf("%q: %v; want 400 naming %s", tc.query, err, tc.wantField)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.query, err)
			continue
		}
		if got.Component != tc.want.Component || got.TailLines != tc.want.TailLines || (got.SinceTime == nil) != (tc.want.SinceTime == nil) ||
			got.SinceTime != nil && !got.SinceTime.Equal(*tc.want.SinceTime) {
			t.Errorf("%q: %+v; want %+v", tc.query, got, tc.want)
		}
	}
}

func TestQueryValuesRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 24, 17, 59, 1, 123456789, time.UTC)
	q := sitelogapi.Query{Component: sitev1.LogComponentBPA, TailLines: 17, SinceTime: &at}
	got, err := sitelogapi.ParseQuery(q.Values(), time.Now())
	if err != nil || got.Component != q.Component || got.TailLines != q.TailLines || !got.SinceTime.Equal(at) {
		t.Errorf("round trip of %+v: %+v %v", q, got, err)
	}
}
