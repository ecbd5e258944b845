package cluster

import (
	"fmt"
	"slices"
	"strings"

	"github.com/edgefleet/edgefleet/bpa/install"
)

// Levels orders a cluster's packages by their manifests' after lists: every package of a level
// comes after packages of earlier levels only, so the packages of one level can be installed at
// the same time. Within a level packages are sorted by name. Two packages of one name, a
// package coming after one the list lacks, and a cycle are errors naming them.
func Levels(pkgs []install.Package) ([][]install.Package, error) {
	byName := map[string]install.Package{}
	for _, p := range pkgs {
		if p.Manifest == nil {
			return nil, fmt.Errorf("packages: a package without a manifest (%s)", p.Digest)
		}
		name := p.Manifest.Name
		if prev, dup := byName[name]; dup {
			return nil, fmt.Errorf("packages: two %s packages (%s and %s): a cluster runs one version of each", name, prev.Manifest.Version, p.Manifest.Version)
		}
		byName[name] = p
	}
	for _, p := range pkgs {
		for _, a := range p.Manifest.After {
			if _, ok := byName[a]; !ok {
				return nil, fmt.Errorf("packages: %s comes after %s, which the cluster's packages do not include", p.Manifest.Name, a)
			}
		}
	}
	level := map[string]int{}
	var levels [][]install.Package
	for len(level) < len(byName) {
		var next []install.Package
		for name, p := range byName {
			if _, done := level[name]; done {
				continue
			}
			if !slices.ContainsFunc(p.Manifest.After, func(a string) bool { _, done := level[a]; return !done }) {
				next = append(next, p)
			}
		}
		if len(next) == 0 {
			var left []string
			for name := range byName {
				if _, done := level[name]; !done {
					left = append(left, name)
				}
			}
			slices.Sort(left)
			return nil, fmt.Errorf("packages: %s come after each other in a cycle (their manifests' after lists)", strings.Join(left, ", "))
		}
		slices.SortFunc(next, func(a, b install.Package) int { return strings.Compare(a.Manifest.Name, b.Manifest.Name) })
		for _, p := range next {
			level[p.Manifest.Name] = len(levels)
		}
		levels = append(levels, next)
	}
	return levels, nil
}

// Ordered is pkgs in install order: Levels flattened.
func Ordered(pkgs []install.Package) ([]install.Package, error) {
	levels, err := Levels(pkgs)
	if err != nil {
		return nil, err
	}
	return slices.Concat(levels...), nil
}
