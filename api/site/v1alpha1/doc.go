// Package v1alpha1 contains the site.edgefleet.io/v1alpha1 kinds that live on each site's local
// cluster — ArtifactSet, the artifacts the site must hold in its cache — and the names of the
// objects through which a site describes itself to, and reaches, the global controller.
//
// +kubebuilder:object:generate=true
// +groupName=site.edgefleet.io
package v1alpha1
