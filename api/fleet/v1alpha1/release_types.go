package v1alpha1

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// Release conditions.
const (
	// ReleaseReadyCondition is True when every artifact the release names is in the artifact
	// store, each of the kind its field names, and its packages go together; a campaign does
	// not start with a release that is not Ready.
	ReleaseReadyCondition = "Ready"
)

// Reasons used by the Release conditions.
const (
	// ReasonArtifactsFound means every digest of the release is in the artifact store.
	ReasonArtifactsFound = "ArtifactsFound"
	// ReasonArtifactsMissing means some digests of the release are not in the artifact store
	// (deleted after the release was admitted); the message names them.
	ReasonArtifactsMissing = "ArtifactsMissing"
	// ReasonWrongArtifactKind means a digest of the release is stored, but as no artifact of
	// the kind its field names (a chart's digest among the packages); the message names each.
	ReasonWrongArtifactKind = "WrongArtifactKind"
	// ReasonPackagesConflict means the release's packages cannot go together on any cluster
	// (a package's manifest comes after a package the release lacks, two versions of one
	// package, a cycle): every site's BPA would refuse them. The message names the packages.
	ReasonPackagesConflict = "PackagesConflict"
	// ReasonPackageInvalid means content a release names as a package is no valid package
	// (uploaded before the store checked packages); the message names it.
	ReasonPackageInvalid = "PackageInvalid"
)

// ReleaseNeverReady reports whether a release that is not Ready for reason never will be: its
// spec and the content it names by digest cannot change.
func ReleaseNeverReady(reason string) bool {
	return reason == ReasonPackagesConflict || reason == ReasonPackageInvalid
}

// ReleaseSpec is what a site's application cluster runs: each artifact by its digest in the
// artifact store. A Release is immutable once created: make a new one for a new version.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a Release is immutable: create a new Release instead"
type ReleaseSpec struct {
	// KubernetesVersion of every node, e.g. "v1.36.3".
	// +required
	// +kubebuilder:validation:Pattern=`^v[0-9]+\.[0-9]+\.[0-9]+$`
	KubernetesVersion string `json:"kubernetesVersion"`

	// OSImage written to every host; with no URL, each site caches it from the artifact store
	// by its sha256.
	// +required
	OSImage sitev1.OSImage `json:"osImage"`

	// Packages are the binary packages installed on the hosts over SSH.
	// +optional
	// +listType=map
	// +listMapKey=sha256
	// +kubebuilder:validation:MaxItems=64
	Packages []sitev1.ArtifactRef `json:"packages,omitempty"`

	// Charts are the Helm charts installed into the application cluster once it is up.
	// +optional
	// +listType=map
	// +listMapKey=sha256
	// +kubebuilder:validation:MaxItems=64
	Charts []sitev1.ArtifactRef `json:"charts,omitempty"`

	// Images are container image archives (docker or OCI image archives, artifact kind
	// container-image-archive) imported into every node's container runtime before workloads
	// need them: nothing is pulled from a registry.
	// +optional
	// +listType=map
	// +listMapKey=sha256
	// +kubebuilder:validation:MaxItems=64
	Images []sitev1.ArtifactRef `json:"images,omitempty"`
}

// Artifacts lists the artifacts the release names, once each: OS image, packages, charts,
// images.
func (s *ReleaseSpec) Artifacts() []sitev1.ArtifactRef {
	return sitev1.UniqueArtifacts(append([]sitev1.ArtifactRef{{SHA256: s.OSImage.SHA256, Name: "os-image"}}, slices.Concat(s.Packages, s.Charts, s.Images)...))
}

// ReleaseArtifact is one artifact a ReleaseSpec names: the field naming it, the reference, and
// the kind of artifact the field takes.
// +kubebuilder:object:generate=false
type ReleaseArtifact struct {
	// Path is the field, e.g. spec.packages[1].
	Path *field.Path
	Ref  sitev1.ArtifactRef
	Kind restv1.ArtifactKind
}

// KindMismatch says why content stored as artifacts of kinds does not fit the field, e.g.
// "stored as helm-chart, not as binary-package"; "" when it does (one of kinds is the field's).
func (a ReleaseArtifact) KindMismatch(kinds []restv1.ArtifactKind) string {
	if slices.Contains(kinds, a.Kind) {
		return ""
	}
	is := make([]string, len(kinds))
	for i, k := range kinds {
		is[i] = string(k)
	}
	return fmt.Sprintf("stored as %s, not as %s", strings.Join(is, " and "), a.Kind)
}

// ArtifactFields lists the artifacts the release names, field by field (a digest named by two
// fields is listed twice), in the order OS image, packages, charts, images.
func (s *ReleaseSpec) ArtifactFields() []ReleaseArtifact {
	spec := field.NewPath("spec")
	out := []ReleaseArtifact{{spec.Child("osImage"), sitev1.ArtifactRef{SHA256: s.OSImage.SHA256, Name: "os-image"}, restv1.KindOSImage}}
	for _, list := range []struct {
		name string
		refs []sitev1.ArtifactRef
		kind restv1.ArtifactKind
	}{
		{"packages", s.Packages, restv1.KindBinaryPackage},
		{"charts", s.Charts, restv1.KindHelmChart},
		{"images", s.Images, restv1.KindContainerImageArchive},
	} {
		for i, a := range list.refs {
			out = append(out, ReleaseArtifact{spec.Child(list.name).Index(i), a, list.kind})
		}
	}
	return out
}

// ReleaseStatus says whether the release can be rolled out.
type ReleaseStatus struct {
	// Conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation last reconciled cleanly.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// Release is an immutable set of a Kubernetes version, an OS image, binary packages and charts,
// each by artifact digest. Campaigns roll releases out to sites; Site.spec.cluster.release
// names the release a site runs.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=edgefleet
// +kubebuilder:printcolumn:name="Kubernetes",type=string,JSONPath=`.spec.kubernetesVersion`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Release struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   ReleaseSpec   `json:"spec"`
	Status ReleaseStatus `json:"status,omitempty"`
}

// ReleaseList is a list of Releases.
//
// +kubebuilder:object:root=true
type ReleaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Release `json:"items"`
}
