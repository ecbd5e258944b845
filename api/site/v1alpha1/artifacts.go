package v1alpha1

import "slices"

// UniqueArtifacts is refs without repeated digests, the first of each kept, in order.
func UniqueArtifacts(refs []ArtifactRef) []ArtifactRef {
	var out []ArtifactRef
	for _, a := range refs {
		if !slices.ContainsFunc(out, func(b ArtifactRef) bool { return b.SHA256 == a.SHA256 }) {
			out = append(out, a)
		}
	}
	return out
}

// Artifacts lists what the cluster needs from the site cache, once each: its OS image (named
// os-image), packages, charts and images.
func (s *ApplicationClusterSpec) Artifacts() []ArtifactRef {
	return UniqueArtifacts(append([]ArtifactRef{{SHA256: s.OSImage.SHA256, Name: "os-image"}}, slices.Concat(s.Packages, s.Charts, s.Images)...))
}
