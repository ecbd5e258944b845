package versionskew

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"
)

// Rule names one rule of the version-skew policy.
type Rule string

// The rules Check applies.
const (
	// NoDowngrade: a control plane is never moved to an older version, minor or patch.
	NoDowngrade Rule = "no control-plane downgrade"
	// OneMinorPerStep: one upgrade goes up at most one minor version.
	OneMinorPerStep Rule = "at most one minor version per upgrade"
	// SameMajor: Kubernetes has one major version; a move to another is no upgrade it knows.
	SameMajor Rule = "no major version change"
)

// Error is a move the policy forbids: which rule it breaks, from which version to which.
type Error struct {
	// Rule broken.
	Rule Rule
	// Current is the version the cluster runs; Target the one it was to run.
	Current, Target *version.Version
}

// Error says what the move would do, the rule it breaks and what to do instead.
func (e *Error) Error() string {
	c, t := e.Current, e.Target
	switch e.Rule {
	case NoDowngrade:
		return fmt.Sprintf("%s would downgrade the control plane from %s (rule: %s; Kubernetes cannot move a control plane back): choose %s or newer, up to v%d.%d",
			v(t), v(c), e.Rule, v(c), c.Major(), c.Minor()+1)
	case OneMinorPerStep:
		return fmt.Sprintf("%s is %d minor versions ahead of %s (rule: %s; kubelets may never be newer than the API server): upgrade to v%d.%d first, then one minor at a time",
			v(t), t.Minor()-c.Minor(), v(c), e.Rule, c.Major(), c.Minor()+1)
	default:
		return fmt.Sprintf("%s changes the major version of %s (rule: %s): choose a v%d version, %s or newer, up to v%d.%d",
			v(t), v(c), e.Rule, c.Major(), v(c), c.Major(), c.Minor()+1)
	}
}

// v prints a version the way Kubernetes does, with its "v".
func v(x *version.Version) string { return "v" + x.String() }

// Check returns nil when a cluster whose every node runs current may be moved to target in one
// step, and otherwise an *Error naming the rule the move breaks. Both are semantic versions,
// with or without the leading "v" ("v1.36.3"); a version that does not parse is an error
// naming it.
func Check(current, target string) error {
	c, err := version.ParseSemantic(current)
	if err != nil {
		return fmt.Errorf("current Kubernetes version %q: %w", current, err)
	}
	t, err := version.ParseSemantic(target)
	if err != nil {
		return fmt.Errorf("target Kubernetes version %q: %w", target, err)
	}
	switch {
	case t.Major() != c.Major():
		return &Error{Rule: SameMajor, Current: c, Target: t}
	case t.LessThan(c):
		return &Error{Rule: NoDowngrade, Current: c, Target: t}
	case t.Minor() > c.Minor()+1:
		return &Error{Rule: OneMinorPerStep, Current: c, Target: t}
	}
	return nil
}
