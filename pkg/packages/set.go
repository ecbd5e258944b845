package packages

import (
	"fmt"
	"slices"
	"strings"
)

// Levels orders a set of packages by their manifests' after lists: each level holds indexes
// into ms, sorted by the packages' names, of packages that come after packages of earlier levels
// only, so that the packages of one level can be installed at the same time. Two packages of one
// name, a package coming after one the set lacks, and a cycle are errors naming them: no cluster
// can run such a set, whatever its hosts.
func Levels(ms []*Manifest) ([][]int, error) {
	byName := map[string]int{}
	for i, m := range ms {
		if prev, dup := byName[m.Name]; dup {
			return nil, fmt.Errorf("two %s packages (%s and %s): a cluster runs one version of each", m.Name, ms[prev].Version, m.Version)
		}
		byName[m.Name] = i
	}
	for _, m := range ms {
		for _, a := range m.After {
			if _, ok := byName[a]; !ok {
				return nil, fmt.Errorf("%s comes after %s, which is not among the packages", m.Name, a)
			}
		}
	}
	level := map[string]int{}
	var levels [][]int
	for len(level) < len(ms) {
		var next []int
		for i, m := range ms {
			if _, done := level[m.Name]; done {
				continue
			}
			if !slices.ContainsFunc(m.After, func(a string) bool { _, done := level[a]; return !done }) {
				next = append(next, i)
			}
		}
		if len(next) == 0 {
			var left []string
			for _, m := range ms {
				if _, done := level[m.Name]; !done {
					left = append(left, m.Name)
				}
			}
			slices.Sort(left)
			return nil, fmt.Errorf("%s come after each other in a cycle (their manifests' after lists)", strings.Join(left, ", "))
		}
		slices.SortFunc(next, func(a, b int) int { return strings.Compare(ms[a].Name, ms[b].Name) })
		for _, i := range next {
			level[ms[i].Name] = len(levels)
		}
		levels = append(levels, next)
	}
	return levels, nil
}
