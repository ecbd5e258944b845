// Package builders builds the test beds' artifacts from the recipes under hack/: binary packages
// (BuildPackage, hack/packages), Helm charts (BuildChart, hack/charts) and container images
// (BuildImage, hack/images: OCI archives made with go-containerregistry, no registry), each the
// same bytes for the same inputs; the *In forms serve programs that are not tests (the demo).
// BuildStack builds what a Release of the real node stack lists (StackPackages at
// KubernetesVersion or PreviousKubernetesVersion, StackImages, StackCharts), and PutArtifact
// stores content in an artifact store as the API does.
package builders
