package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ArtifactSet conditions.
const (
	// ArtifactSetReadyCondition is True when every artifact of the set is cached, verified and
	// served by the site cache.
	ArtifactSetReadyCondition = "Ready"
)

// Reasons used by the ArtifactSet conditions.
const (
	// ReasonAllCached means every artifact of the set is in the site cache.
	ReasonAllCached = "AllCached"
	// ReasonFetching means some artifacts are still being fetched from the global controller.
	ReasonFetching = "Fetching"
	// ReasonFetchFailed means fetching an artifact failed; the message names it and says why.
	// The fetch is retried with a growing delay.
	ReasonFetchFailed = "FetchFailed"
	// ReasonGlobalAPINotConfigured means the Secret GlobalAPISecretName is missing or incomplete,
	// so nothing can be fetched.
	ReasonGlobalAPINotConfigured = "GlobalAPINotConfigured"
)

// ArtifactPhase is where one artifact of a set stands in the site cache.
// +kubebuilder:validation:Enum=Pending;Fetching;Cached;Failed
type ArtifactPhase string

// Artifact phases.
const (
	// ArtifactPending is not cached and not being fetched yet.
	ArtifactPending ArtifactPhase = "Pending"
	// ArtifactFetching is being fetched from the global controller.
	ArtifactFetching ArtifactPhase = "Fetching"
	// ArtifactCached is cached, verified against its sha256, and served at its URL.
	ArtifactCached ArtifactPhase = "Cached"
	// ArtifactFailed could not be fetched; the message says why.
	ArtifactFailed ArtifactPhase = "Failed"
)

// ArtifactSetSpec lists the artifacts the site must hold in its cache.
type ArtifactSetSpec struct {
	// Artifacts to cache, by content digest. The same digest in several sets is fetched and
	// stored once.
	// +required
	// +listType=map
	// +listMapKey=sha256
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	Artifacts []ArtifactRef `json:"artifacts"`
}

// ArtifactRef names one artifact of the global artifact store by content.
type ArtifactRef struct {
	// SHA256 is the hex sha256 of the artifact's content: 64 lower-case hex digits.
	// +required
	// +kubebuilder:validation:Pattern=`^[a-f0-9]{64}$`
	SHA256 string `json:"sha256"`

	// Name says what the artifact is, for people reading the status ("os-image ubuntu 24.04").
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
}

// ArtifactSetStatus reports what the site cache holds of the set.
type ArtifactSetStatus struct {
	// Conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation last reconciled cleanly.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Cached is how many artifacts of the set are cached.
	// +optional
	Cached int32 `json:"cached,omitempty"`

	// Total is how many artifacts the set lists.
	// +optional
	Total int32 `json:"total,omitempty"`

	// Artifacts is the state of each artifact of the set, in the order of spec.artifacts.
	// +optional
	// +listType=map
	// +listMapKey=sha256
	Artifacts []CachedArtifact `json:"artifacts,omitempty"`
}

// CachedArtifact is the state of one artifact in the site cache.
type CachedArtifact struct {
	// SHA256 of the artifact.
	// +required
	SHA256 string `json:"sha256"`

	// Phase: Pending, Fetching, Cached or Failed.
	// +required
	Phase ArtifactPhase `json:"phase"`

	// Size in bytes, once cached.
	// +optional
	Size int64 `json:"size,omitempty"`

	// URL at which the site cache serves the artifact (HTTP, with Range and an ETag of
	// "sha256:<digest>"), once cached: what Ironic and the BPA read. It is signed for this
	// digest (?signature=), so that a reader without a site credential — Ironic's agent on a
	// host being provisioned — reads it, and nothing else, with the URL alone.
	// +optional
	URL string `json:"url,omitempty"`

	// Message says why the artifact is not cached, when it is not.
	// +optional
	Message string `json:"message,omitempty"`
}

// ArtifactSet is a set of artifacts that a site must hold in its local cache — typically the OS
// image, packages and charts of one release. The local controller fetches the missing ones from
// the global controller, verifies them, serves them on the site network, and deletes cached
// artifacts that no ArtifactSet lists any more.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=edgefleet
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Cached",type=integer,JSONPath=`.status.cached`
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.total`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ArtifactSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   ArtifactSetSpec   `json:"spec"`
	Status ArtifactSetStatus `json:"status,omitempty"`
}

// ArtifactSetList is a list of ArtifactSets.
//
// +kubebuilder:object:root=true
type ArtifactSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ArtifactSet `json:"items"`
}
