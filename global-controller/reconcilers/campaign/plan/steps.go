package plan

import (
	"errors"
	"fmt"
	"sort"

	utilversion "k8s.io/apimachinery/pkg/util/version"

	"github.com/edgefleet/edgefleet/pkg/versionskew"
)

// NoStepError is a move of more than one minor version for which the campaign's namespace has
// no Release to step through: none at minor version Minor of Current's major.
type NoStepError struct {
	// Current is the version the control plane runs, Target the one the campaign's release has.
	Current, Target string
	// Major and Minor are the version a step would need a Release of.
	Major, Minor uint
}

func (e *NoStepError) Error() string {
	return fmt.Sprintf("%s is more than one minor version ahead of %s, and a cluster moves one minor version per step (rule: %s), but no Release of this namespace is at v%d.%d to step through: create one (the same packages at a v%d.%d Kubernetes version), then the campaign moves the site through it",
		e.Target, e.Current, versionskew.OneMinorPerStep, e.Major, e.Minor, e.Major, e.Minor)
}

// Steps returns the releases a cluster whose control plane runs version current moves through
// to reach release target, in order, target last; versions maps the releases of the campaign's
// namespace to their Kubernetes versions. When the version-skew policy allows the move in one
// step, that is target alone. When target's version is more minor versions ahead, the policy's
// one minor version per step is kept by a step through each minor version between: for each,
// the release with the newest version of that minor (the first name among equal versions), so
// that the same inputs always give the same steps. It fails with the policy's *versionskew.Error
// for a move no steps can make (a downgrade, another major version), and with a *NoStepError
// when a minor version between has no release. An unknown version (current "" or target not in
// versions) is not checked: target alone.
func Steps(current, target string, versions map[string]string) ([]string, error) {
	targetVersion := versions[target]
	if current == "" || targetVersion == "" {
		return []string{target}, nil
	}
	err := versionskew.Check(current, targetVersion)
	var skew *versionskew.Error
	if err == nil || !errors.As(err, &skew) || skew.Rule != versionskew.OneMinorPerStep {
		return []string{target}, err
	}
	c, t := skew.Current, skew.Target
	// The newest release of each minor version between, by minor.
	type candidate struct {
		name string
		v    *utilversion.Version
	}
	newest := map[uint]candidate{}
	names := make([]string, 0, len(versions))
	for name := range versions {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		v, err := utilversion.ParseSemantic(versions[name])
		if err != nil || v.Major() != c.Major() || v.Minor() <= c.Minor() || v.Minor() >= t.Minor() {
			continue
		}
		if best, ok := newest[v.Minor()]; !ok || best.v.LessThan(v) {
			newest[v.Minor()] = candidate{name, v}
		}
	}
	var steps []string
	for minor := c.Minor() + 1; minor < t.Minor(); minor++ {
		best, ok := newest[minor]
		if !ok {
			return nil, &NoStepError{Current: "v" + c.String(), Target: "v" + t.String(), Major: c.Major(), Minor: minor}
		}
		steps = append(steps, best.name)
	}
	return append(steps, target), nil
}
