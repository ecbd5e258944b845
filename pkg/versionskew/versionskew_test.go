package versionskew_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/edgefleet/edgefleet/pkg/versionskew"
)

// TestCheck checks the anchors of issue 35 (a cluster on v1.36.3 told to run v1.34.0, v1.35.8,
// v1.36.2 or v1.38.0 is refused with the rule it breaks and what to choose instead) and the
// moves the policy allows.
func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		current, target string
		rule            versionskew.Rule // "" when allowed
		want            []string         // in the message
	}{
		{"v1.36.3", "v1.34.0", versionskew.NoDowngrade, []string{"v1.34.0 would downgrade the control plane from v1.36.3", "choose v1.36.3 or newer, up to v1.37"}},
		{"v1.36.3", "v1.35.8", versionskew.NoDowngrade, []string{"v1.35.8 would downgrade", "no control-plane downgrade"}},
		{"v1.36.3", "v1.36.2", versionskew.NoDowngrade, []string{"v1.36.2 would downgrade the control plane from v1.36.3"}},
		{"v1.36.3", "v1.38.0", versionskew.OneMinorPerStep, []string{"v1.38.0 is 2 minor versions ahead of v1.36.3", "upgrade to v1.37 first"}},
		{"v1.36.3", "v1.40.1", versionskew.OneMinorPerStep, []string{"4 minor versions ahead"}},
		{"v1.36.3", "v2.0.0", versionskew.SameMajor, []string{"v2.0.0 changes the major version of v1.36.3", "choose a v1 version"}},
		{"v1.36.3", "v0.37.0", versionskew.SameMajor, nil},
		{"v1.36.3", "v1.36.3", "", nil},
		{"v1.36.3", "v1.36.4", "", nil},
		{"v1.36.3", "v1.37.0", "", nil},
		{"v1.36.3", "v1.37.9", "", nil},
		{"1.35.8", "v1.36.3", "", nil},
		{"v1.36.0-rc.1", "v1.36.0", "", nil},
		{"v1.36.0", "v1.36.0-rc.1", versionskew.NoDowngrade, nil},
	} {
		t.Run(tt.current+"->"+tt.target, func(t *testing.T) {
			err := versionskew.Check(tt.current, tt.target)
			if tt.rule == "" {
				if err != nil {
					t.Fatalf("got %v, want allowed", err)
				}
				return
			}
			var se *versionskew.Error
			if !errors.As(err, &se) || se.Rule != tt.rule {
				t.Fatalf("got %v, want refused by rule %q", err, tt.rule)
			}
			for _, w := range append(tt.want, string(tt.rule)) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestCheckNamesAVersionThatDoesNotParse checks that a version that is not semantic is an
// error naming which one and what it was, not a rule.
func TestCheckNamesAVersionThatDoesNotParse(t *testing.T) {
	for _, tt := range []struct{ current, target, want string }{
		{"v1.36", "v1.36.3", `current Kubernetes version "v1.36"`},
		{"v1.36.3", "latest", `target Kubernetes version "latest"`},
	} {
		err := versionskew.Check(tt.current, tt.target)
		var se *versionskew.Error
		if err == nil || errors.As(err, &se) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Check(%q, %q) = %v, want a parse error naming %s", tt.current, tt.target, err, tt.want)
		}
	}
}

type ver struct{ major, minor, patch int }

func (v ver) String() string { return fmt.Sprintf("v%d.%d.%d", v.major, v.minor, v.patch) }

func (v ver) less(o ver) bool {
	if v.major != o.major {
		return v.major < o.major
	}
	if v.minor != o.minor {
		return v.minor < o.minor
	}
	return v.patch < o.patch
}

func genVer() *rapid.Generator[ver] {
	return rapid.Custom(func(t *rapid.T) ver {
		return ver{rapid.IntRange(1, 2).Draw(t, "major"), rapid.IntRange(0, 40).Draw(t, "minor"), rapid.IntRange(0, 20).Draw(t, "patch")}
	})
}

// TestCheckProperties checks, over random current and target versions, that a move is allowed
// exactly when it keeps the major version, goes nowhere older and at most one minor up; that
// a refusal names the first rule broken (major, then downgrade, then skip); that staying put is
// always allowed; and that no chain of allowed moves ever ends older than where it started
// (which is what keeps kubelets from being newer than the API servers they follow).
func TestCheckProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c, tg := genVer().Draw(t, "current"), genVer().Draw(t, "target")
		err := versionskew.Check(c.String(), tg.String())
		var want versionskew.Rule
		switch {
		case tg.major != c.major:
			want = versionskew.SameMajor
		case tg.less(c):
			want = versionskew.NoDowngrade
		case tg.minor > c.minor+1:
			want = versionskew.OneMinorPerStep
		}
		var se *versionskew.Error
		switch {
		case want == "" && err != nil:
			t.Fatalf("%s -> %s: got %v, want allowed", c, tg, err)
		case want != "" && (!errors.As(err, &se) || se.Rule != want):
			t.Fatalf("%s -> %s: got %v, want refused by %q", c, tg, err, want)
		case want != "" && (!strings.Contains(err.Error(), c.String()) || !strings.Contains(err.Error(), tg.String())):
			t.Fatalf("%s -> %s: message %q names neither version", c, tg, err)
		}
		if err := versionskew.Check(c.String(), c.String()); err != nil {
			t.Fatalf("%s -> itself: %v", c, err)
		}
		// A chain of moves, each allowed, never ends below its start nor more than one minor
		// version per move above it.
		at, steps := c, rapid.IntRange(1, 6).Draw(t, "steps")
		for i := range steps {
			next := genVer().Draw(t, fmt.Sprintf("step %d", i))
			if versionskew.Check(at.String(), next.String()) == nil {
				at = next
			}
		}
		if at.less(c) || at.major != c.major || at.minor > c.minor+steps {
			t.Fatalf("allowed moves took %s to %s in %d steps", c, at, steps)
		}
	})
}
