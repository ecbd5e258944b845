package cluster

import (
	"fmt"
	"slices"
	"strings"

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

// Placed checks that each of a cluster's packages has a host to run on: a package for worker
// hosts (its manifest's hosts) needs a cluster with one — workers counts the cluster's worker
// hosts, provisioned yet or not; every cluster has a control-plane host. A package whose
// requirement the cluster does not meet (kms: whether it has the KMS plugin) is left out, and
// not checked. The error names the packages and the fix.
func Placed(pkgs []install.Package, workers int, kms bool) error {
	if workers > 0 {
		return nil
	}
	var hostless []string
	for _, p := range pkgs {
		if m := p.Manifest; m.Hosts == packages.HostsWorker && m.Requires.Met(kms) {
			hostless = append(hostless, m.Name)
		}
	}
	if len(hostless) == 0 {
		return nil
	}
	return fmt.Errorf("packages: %s run on worker hosts only (their manifests' hosts), and the cluster has no worker host: add a worker Host to the site, or roll out a Release without them",
		strings.Join(hostless, ", "))
}
