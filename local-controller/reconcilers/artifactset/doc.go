// Package artifactset reconciles ArtifactSets on a site's local cluster: it fetches the
// artifacts they list from the global artifact API into the site cache (resuming broken
// transfers, publishing only verified content), reports each artifact's state and URL in
// status, fetches again what the cache found corrupted, and removes from the cache what no
// ArtifactSet lists any more.
package artifactset
