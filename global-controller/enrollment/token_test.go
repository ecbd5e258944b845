package enrollment

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
)

func TestNewAndParseToken(t *testing.T) {
	token, id, err := NewToken(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	gotID, secret, err := ParseToken(token)
	if err != nil || gotID != id || token != id+"."+secret {
		t.Fatalf("ParseToken(%q) = %q, %q, %v; want id %q", token, gotID, secret, err, id)
	}
	other, _, _ := NewToken(rand.Reader)
	if other == token {
		t.Fatal("two tokens are equal")
	}
	if _, _, err := NewToken(bytes.NewReader(make([]byte, 3))); err == nil {
		t.Error("NewToken with too little randomness: no error")
	}
	for _, bad := range []string{
		"", "nodot", id + ".", "." + secret, strings.ToUpper(id) + "." + secret, id[:15] + "." + secret,
		id + "." + secret[:42], id + "." + secret + "A", id + "." + strings.Replace(secret, secret[:1], "+", 1), id + "." + secret + ".x",
	} {
		if _, _, err := ParseToken(bad); err == nil || !strings.Contains(err.Error(), "malformed") {
			t.Errorf("ParseToken(%q) error = %v, want malformed", bad, err)
		}
	}
}

func TestCheckToken(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	const secret = "s3cret"
	valid := Record{ID: "0123456789abcdef", Namespace: "fleet", Site: "site-a", Hash: HashSecret(secret), Created: now.Add(-time.Hour), Expires: now.Add(time.Hour)}
	with := func(f func(*Record)) *Record { r := valid; f(&r); return &r }
	cases := []struct {
		name       string
		rec        *Record
		secret     string
		ns, site   string
		wantReason string // "" = accepted
		wantText   string
	}{
		{name: "valid", rec: &valid, secret: secret, ns: "fleet", site: "site-a"},
		{name: "used by a machine is still fine here (CheckMachine decides)", rec: with(func(r *Record) { r.UsedBy = "ab" }), secret: secret, ns: "fleet", site: "site-a"},
		{name: "no such token", rec: nil, secret: secret, ns: "fleet", site: "site-a", wantReason: ReasonUnknownToken, wantText: "not one issued"},
		{name: "wrong secret", rec: &valid, secret: "guess", ns: "fleet", site: "site-a", wantReason: ReasonUnknownToken, wantText: "not one issued"},
		{name: "revoked", rec: with(func(r *Record) { r.Revoked = true }), secret: secret, ns: "fleet", site: "site-a", wantReason: ReasonRevoked, wantText: "revoked"},
		{name: "revoked and expired says revoked", rec: with(func(r *Record) { r.Revoked, r.Expires = true, now.Add(-time.Minute) }), secret: secret, ns: "fleet", site: "site-a", wantReason: ReasonRevoked},
		{name: "expired", rec: with(func(r *Record) { r.Expires = now.Add(-time.Minute) }), secret: secret, ns: "fleet", site: "site-a", wantReason: ReasonExpired, wantText: "expired at 2026-11-24T09:59:00Z"},
		{name: "expires right now", rec: with(func(r *Record) { r.Expires = now }), secret: secret, ns: "fleet", site: "site-a", wantReason: ReasonExpired},
		{name: "another site", rec: &valid, secret: secret, ns: "fleet", site: "site-b", wantReason: ReasonOtherSite, wantText: "issued for site fleet/site-a, not fleet/site-b"},
		{name: "wrong secret for another site says unknown", rec: &valid, secret: "x", ns: "fleet", site: "site-b", wantReason: ReasonUnknownToken},
		{name: "failed attempts below the limit", rec: with(func(r *Record) { r.Failures = 4 }), secret: secret, ns: "fleet", site: "site-a"},
		{name: "failed attempts at the limit", rec: with(func(r *Record) { r.Failures = 5 }), secret: secret, ns: "fleet", site: "site-a", wantReason: ReasonTooMany,
			wantText: "5 attempts with it did not enroll, the limit is 5; issue a new token (edgefleet site token create site-a -n fleet)"},
		{name: "wrong secret of a used-up token says unknown", rec: with(func(r *Record) { r.Failures = 5 }), secret: "x", ns: "fleet", site: "site-a", wantReason: ReasonUnknownToken},
		{name: "revoked and used up says revoked", rec: with(func(r *Record) { r.Revoked, r.Failures = true, 9 }), secret: secret, ns: "fleet", site: "site-a", wantReason: ReasonRevoked},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckToken(tc.rec, tc.secret, tc.ns, tc.site, now, 5)
			if tc.wantReason == "" {
				if got != nil {
					t.Fatalf("refused: %v", got)
				}
				return
			}
			if got == nil || got.Reason != tc.wantReason || !strings.Contains(got.Message, tc.wantText) {
				t.Fatalf("got %+v, want reason %s with %q", got, tc.wantReason, tc.wantText)
			}
			if strings.Contains(got.Message, tc.secret) && tc.secret != "x" {
				t.Errorf("message %q carries the secret", got.Message)
			}
		})
	}
}

func TestCheckMachine(t *testing.T) {
	used := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	cases := []struct {
		name        string
		rec         Record
		fingerprint string
		want        string
	}{
		{name: "unused", rec: Record{ID: "1"}, fingerprint: "aaaa"},
		{name: "used by the same cluster (a retry)", rec: Record{ID: "1", UsedBy: "aaaa", Machine: "m1", Used: used}, fingerprint: "aaaa"},
		{name: "used by another cluster", rec: Record{ID: "1", UsedBy: "bbbbbbbbbbbbbbbbbb", Machine: "m1", Used: used}, fingerprint: "aaaa",
			want: `already used by machine "m1" (cluster bbbbbbbbbbbb) at 2026-11-24T09:00:00Z`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckMachine(tc.rec, tc.fingerprint)
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("refused: %v", got)
			case tc.want != "" && (got == nil || got.Reason != ReasonUsed || !strings.Contains(got.Message, tc.want)):
				t.Fatalf("got %+v, want %s with %q", got, ReasonUsed, tc.want)
			}
		})
	}
}

func TestTTL(t *testing.T) {
	cases := []struct {
		req     string
		want    time.Duration
		wantErr string
	}{
		{req: "", want: 4 * time.Hour},
		{req: "90m", want: 90 * time.Minute},
		{req: "24h", want: 24 * time.Hour},
		{req: "25h", wantErr: "longer than the controller's maximum 24h0m0s"},
		{req: "30s", wantErr: "shorter than a minute"},
		{req: "-1h", wantErr: "shorter than a minute"},
		{req: "4 hours", wantErr: "not a duration"},
	}
	for _, tc := range cases {
		got, err := TTL(tc.req, 4*time.Hour, 24*time.Hour)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("TTL(%q) error = %v, want %q", tc.req, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("TTL(%q) = %s, %v; want %s", tc.req, got, err, tc.want)
		}
	}
}

func TestState(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		rec  Record
		want restv1.EnrollmentTokenState
	}{
		{Record{Expires: now.Add(time.Second)}, restv1.TokenValid},
		{Record{Expires: now}, restv1.TokenExpired},
		{Record{Expires: now, UsedBy: "a"}, restv1.TokenUsed},
		{Record{Expires: now.Add(time.Hour), UsedBy: "a", Revoked: true}, restv1.TokenRevoked},
	}
	for i, tc := range cases {
		if got := tc.rec.State(now); got != tc.want {
			t.Errorf("%d: State = %s, want %s", i, got, tc.want)
		}
	}
}

func TestRecordSecretRoundTrip(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	for _, r := range []Record{
		{ID: "0123456789abcdef", Namespace: "fleet", Site: "site-a", Hash: "h", CreatedBy: "alice", Created: now, Expires: now.Add(time.Hour)},
		{ID: "0123456789abcdef", Namespace: "fleet", Site: "site-a", Hash: "h", Created: now, Expires: now.Add(time.Hour), Revoked: true, UsedBy: "fp", Machine: "m", Used: now},
		{ID: "0123456789abcdef", Namespace: "fleet", Site: "site-a", Hash: "h", Created: now, Expires: now.Add(time.Hour), Failures: 3},
	} {
		s := r.newSecret()
		if s.Name != "enrollment-token-0123456789abcdef" || s.Labels[SiteLabel] != "site-a" || s.Type != SecretType {
			t.Fatalf("secret metadata: %+v", s.ObjectMeta)
		}
		got, err := recordOf(s)
		if err != nil || got != r {
			t.Fatalf("recordOf = %+v, %v; want %+v", got, err, r)
		}
	}
	for _, bad := range []string{"many", "-1"} {
		s := Record{ID: "0123456789abcdef", Namespace: "fleet", Site: "site-a", Hash: "h", Created: now, Expires: now.Add(time.Hour)}.newSecret()
		s.Data["failedAttempts"] = []byte(bad)
		if _, err := recordOf(s); err == nil || !strings.Contains(err.Error(), "failedAttempts is not a count") {
			t.Errorf("recordOf with failedAttempts %q: %v, want an error naming it", bad, err)
		}
	}
}

func TestCheckCredential(t *testing.T) {
	qs := []Question{
		{Access: authzv1.ResourceAttributes{Verb: "get", Resource: "configmaps", Namespace: "edgefleet-system"}, Allowed: true},
		{Access: authzv1.ResourceAttributes{Verb: "*", Group: "*", Resource: "*"}, Allowed: false},
	}
	cases := []struct {
		name    string
		answers []bool
		reason  string
		text    string
	}{
		{name: "least privilege", answers: []bool{true, false}},
		{name: "admin", answers: []bool{true, true}, reason: ReasonTooPrivileged, text: "may * *.* in all namespaces"},
		{name: "too little", answers: []bool{false, false}, reason: ReasonLacksAccess, text: `may not get configmaps in namespace "edgefleet-system"`},
		{name: "too much wins over too little", answers: []bool{false, true}, reason: ReasonTooPrivileged},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckCredential(qs, tc.answers)
			if tc.reason == "" {
				if got != nil {
					t.Fatalf("refused: %v", got)
				}
				return
			}
			if got == nil || got.Reason != tc.reason || !strings.Contains(got.Message, tc.text) {
				t.Fatalf("got %+v, want %s with %q", got, tc.reason, tc.text)
			}
		})
	}
	// The shipped questions ask for both kinds of answer.
	var need, deny int
	for _, q := range Questions() {
		if q.Allowed {
			need++
		} else {
			deny++
		}
	}
	if need == 0 || deny == 0 {
		t.Errorf("Questions: %d needed, %d denied", need, deny)
	}
}

func TestPrunable(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		expires   time.Time
		retention time.Duration
		want      bool
	}{
		{now.Add(time.Hour), 0, false},
		{now, 0, true},
		{now.Add(-time.Hour), 2 * time.Hour, false},
		{now.Add(-2 * time.Hour), 2 * time.Hour, true},
	} {
		if got := (Record{Expires: tc.expires}).Prunable(now, tc.retention); got != tc.want {
			t.Errorf("expires %s, retention %s: Prunable = %v, want %v", tc.expires, tc.retention, got, tc.want)
		}
	}
}
