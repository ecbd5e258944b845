package cluster

import (
	"fmt"
	"slices"

	"github.com/edgefleet/edgefleet/bpa/install"
	"github.com/edgefleet/edgefleet/pkg/packages"
)

// Levels orders a cluster's packages by their manifests' after lists (packages.Levels): every
// package of a level comes after packages of earlier levels only, so the packages of one level
// can be installed at the same time. Within a level packages are sorted by name. Two packages of
// one name, a package coming after one the list lacks, and a cycle are errors naming them.
func Levels(pkgs []install.Package) ([][]install.Package, error) {
	ms := make([]*packages.Manifest, len(pkgs))
	for i, p := range pkgs {
		if p.Manifest == nil {
			return nil, fmt.Errorf("packages: a package without a manifest (%s)", p.Digest)
		}
		ms[i] = p.Manifest
	}
	order, err := packages.Levels(ms)
	if err != nil {
		return nil, fmt.Errorf("packages: %w", err)
	}
	levels := make([][]install.Package, len(order))
	for l, idx := range order {
		for _, i := range idx {
			levels[l] = append(levels[l], pkgs[i])
		}
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
