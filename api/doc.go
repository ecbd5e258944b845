// Package api holds edgefleet's API types: the CRD kinds of the global cluster
// (fleet/v1alpha1), the kinds that live on each site's local cluster (site/v1alpha1) and the
// REST wire types of the artifact API (rest/v1). It imports only apimachinery-level packages.
package api
