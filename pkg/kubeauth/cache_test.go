package kubeauth

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestTTLCache(t *testing.T) {
	const ttl = 10 * time.Second
	type add struct {
		at  time.Duration // since the start
		key string
	}
	cases := []struct {
		name     string
		ttl      time.Duration
		capacity int
		adds     []add
		wantLen  int           // entries held right after the last add
		checkAt  time.Duration // when present and absent are looked up
		present  []string
		absent   []string
	}{
		{
			name: "an entry lives just short of its TTL", ttl: ttl, capacity: 10,
			adds:    []add{{0, "a"}},
			wantLen: 1, checkAt: ttl - time.Nanosecond, present: []string{"a"},
		},
		{
			name: "an entry expires after its TTL", ttl: ttl, capacity: 10,
			adds:    []add{{0, "a"}, {5 * time.Second, "b"}},
			wantLen: 2, checkAt: ttl, present: []string{"b"}, absent: []string{"a"},
		},
		{
			name: "adding a key again renews it", ttl: ttl, capacity: 10,
			adds:    []add{{0, "a"}, {6 * time.Second, "a"}},
			wantLen: 1, checkAt: 12 * time.Second, present: []string{"a"},
		},
		{
			name: "expired entries are dropped on insert", ttl: ttl, capacity: 10,
			adds:    []add{{0, "a"}, {time.Second, "b"}, {2 * time.Second, "c"}, {11 * time.Second, "d"}},
			wantLen: 2, checkAt: 11 * time.Second, present: []string{"c", "d"}, absent: []string{"a", "b"},
		},
		{
			name: "the cap holds: the oldest entries make room", ttl: ttl, capacity: 3,
			adds:    []add{{0, "a"}, {time.Second, "b"}, {2 * time.Second, "c"}, {3 * time.Second, "d"}, {4 * time.Second, "e"}},
			wantLen: 3, checkAt: 4 * time.Second, present: []string{"c", "d", "e"}, absent: []string{"a", "b"},
		},
		{
			name: "re-adding at the cap evicts nothing else", ttl: ttl, capacity: 2,
			adds:    []add{{0, "a"}, {time.Second, "b"}, {2 * time.Second, "a"}},
			wantLen: 2, checkAt: 2 * time.Second, present: []string{"a", "b"},
		},
		{
			name: "a negative TTL keeps nothing", ttl: -1, capacity: 10,
			adds:    []add{{0, "a"}},
			wantLen: 0, checkAt: 0, absent: []string{"a"},
		},
		{
			name: "a zero capacity keeps nothing", ttl: ttl, capacity: 0,
			adds:    []add{{0, "a"}},
			wantLen: 0, checkAt: 0, absent: []string{"a"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			clk := clocktesting.NewFakeClock(start)
			c := newTTLCache[string, string](clk, tc.ttl, tc.capacity)
			for _, a := range tc.adds {
				clk.SetTime(start.Add(a.at))
				c.add(a.key, "value of "+a.key)
			}
			if got := c.len(); got != tc.wantLen {
				t.Errorf("len after the adds = %d, want %d", got, tc.wantLen)
			}
			clk.SetTime(start.Add(tc.checkAt))
			for _, k := range tc.present {
				if v, ok := c.get(k); !ok || v != "value of "+k {
					t.Errorf("get(%q) = %q, %v; want %q, true", k, v, ok, "value of "+k)
				}
			}
			for _, k := range tc.absent {
				if v, ok := c.get(k); ok {
					t.Errorf("get(%q) = %q, true; want it gone", k, v)
				}
			}
		})
	}
}

func TestTTLCacheConcurrentUse(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	c := newTTLCache[int, int](clk, time.Minute, 100)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				c.add(g*1000+i, i)
				c.get(g*1000 + i/2)
				if i%100 == 0 {
					clk.Step(time.Second)
				}
			}
		})
	}
	wg.Wait()
	if got := c.len(); got > 100 {
		t.Errorf("len = %d, over the cap of 100", got)
	}
}

func TestDecisionKey(t *testing.T) {
	base := User{Name: "alice", UID: "1", Groups: []string{"a", "b"}, Extra: map[string][]string{"k": {"v"}}}
	with := func(f func(*User)) User {
		u := base.clone()
		f(&u)
		return u
	}
	get := Access{Verb: "get", Group: "fleet.edgefleet.io", Resource: "sites", Namespace: "fleet"}
	access := func(f func(*Access)) Access {
		a := get
		f(&a)
		return a
	}
	cases := []struct {
		name      string
		u1, u2    User
		a1, a2    Access
		wantEqual bool
	}{
		{name: "same request", u1: base, u2: base.clone(), a1: get, a2: get, wantEqual: true},
		{name: "group order does not matter", u1: base, u2: with(func(u *User) { u.Groups = []string{"b", "a"} }), a1: get, a2: get, wantEqual: true},
		{name: "verb", u1: base, u2: base, a1: get, a2: access(func(a *Access) { a.Verb = "list" })},
		{name: "object name", u1: base, u2: base, a1: access(func(a *Access) { a.Name = "x" }), a2: access(func(a *Access) { a.Name = "y" })},
		{name: "namespace", u1: base, u2: base, a1: get, a2: access(func(a *Access) { a.Namespace = "" })},
		{name: "resource", u1: base, u2: base, a1: get, a2: access(func(a *Access) { a.Resource = "campaigns" })},
		{name: "API group", u1: base, u2: base, a1: get, a2: access(func(a *Access) { a.Group = "" })},
		{name: "uid", u1: base, u2: with(func(u *User) { u.UID = "2" }), a1: get, a2: get},
		{name: "groups", u1: base, u2: with(func(u *User) { u.Groups = []string{"a"} }), a1: get, a2: get},
		{name: "extra", u1: base, u2: with(func(u *User) { u.Extra = nil }), a1: get, a2: get},
		{name: "no ambiguity between fields", u1: User{Name: "a1:b"}, u2: User{Name: "a", UID: "b"}, a1: get, a2: get},
		{name: "no ambiguity between access fields", u1: base, u2: base,
			a1: access(func(a *Access) { a.Namespace, a.Name = "ab", "" }), a2: access(func(a *Access) { a.Namespace, a.Name = "a", "b" })},
		{name: "no ambiguity between groups", u1: User{Name: "a", Groups: []string{"x,y"}}, u2: User{Name: "a", Groups: []string{"x", "y"}}, a1: get, a2: get},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k1, k2 := decisionKey(tc.u1, tc.a1), decisionKey(tc.u2, tc.a2)
			if (k1 == k2) != tc.wantEqual {
				t.Errorf("keys %q and %q: equal = %v, want %v", k1, k2, k1 == k2, tc.wantEqual)
			}
		})
	}
}

func TestBearerToken(t *testing.T) {
	cases := []struct {
		header      []string
		wantToken   string
		wantProblem string
	}{
		{header: nil, wantProblem: "missing Authorization header"},
		{header: []string{"Basic eHl6"}, wantProblem: "not a Bearer token"},
		{header: []string{"Bearer"}, wantProblem: "empty Bearer token"},
		{header: []string{"Bearer   "}, wantProblem: "empty Bearer token"},
		{header: []string{"BearerX abc"}, wantProblem: "not a Bearer token"},
		{header: []string{"Bearer a", "Bearer b"}, wantProblem: "more than one Authorization header"},
		{header: []string{"Bearer abc.def"}, wantToken: "abc.def"},
		{header: []string{"bearer  abc.def "}, wantToken: "abc.def"},
	}
	for i, tc := range cases {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			h := map[string][]string{}
			if tc.header != nil {
				h["Authorization"] = tc.header
			}
			token, problem := bearerToken(h)
			if token != tc.wantToken {
				t.Errorf("token = %q, want %q", token, tc.wantToken)
			}
			if tc.wantProblem == "" && problem != "" || tc.wantProblem != "" && !strings.Contains(problem, tc.wantProblem) {
				t.Errorf("problem = %q, want one containing %q", problem, tc.wantProblem)
			}
		})
	}
}
