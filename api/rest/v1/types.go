package v1

import "time"

// ArtifactKind is what an artifact is.
type ArtifactKind string

// Artifact kinds.
const (
	KindOSImage               ArtifactKind = "os-image"
	KindBinaryPackage         ArtifactKind = "binary-package"
	KindHelmChart             ArtifactKind = "helm-chart"
	KindContainerImageArchive ArtifactKind = "container-image-archive"
)

// Kinds lists every artifact kind.
func Kinds() []ArtifactKind {
	return []ArtifactKind{KindOSImage, KindBinaryPackage, KindHelmChart, KindContainerImageArchive}
}

// Headers of the upload protocol.
const (
	// HeaderUploadOffset carries the offset a chunk starts at (request) and the server's offset
	// after it (answer).
	HeaderUploadOffset = "Upload-Offset"
	// HeaderSHA256 carries the expected digest of a single-request upload, as a header or a trailer.
	HeaderSHA256 = "X-Content-SHA256"
)

// ArtifactSpec is what the uploader says about an artifact. (kind, name, version, architecture)
// is unique in the store.
type ArtifactSpec struct {
	Kind         ArtifactKind      `json:"kind"`
	Name         string            `json:"name"`
	Version      string            `json:"version"`
	Architecture string            `json:"architecture"`
	Labels       map[string]string `json:"labels,omitempty"`
	Description  string            `json:"description,omitempty"`
}

// Artifact is a stored artifact.
type Artifact struct {
	ArtifactSpec `json:",inline"`
	// ID identifies the artifact in URLs.
	ID string `json:"id"`
	// SHA256 of the content, lower-case hex.
	SHA256 string `json:"sha256"`
	// Size of the content in bytes.
	Size int64 `json:"size"`
	// Created is when the upload finished.
	Created time.Time `json:"created"`
	// Creator is the user who uploaded it.
	Creator string `json:"creator"`
}

// ArtifactList is one page of artifacts.
type ArtifactList struct {
	Items []Artifact `json:"items"`
	// Continue, when set, fetches the next page (?continue=...).
	Continue string `json:"continue,omitempty"`
}

// CreateUpload starts a resumable upload session.
type CreateUpload struct {
	ArtifactSpec `json:",inline"`
	// SHA256 the content must have, when known up front; it can also be given at finish.
	SHA256 string `json:"sha256,omitempty"`
	// Size of the content in bytes, when known up front.
	Size *int64 `json:"size,omitempty"`
}

// Upload is a resumable upload session.
type Upload struct {
	ID       string       `json:"id"`
	Artifact ArtifactSpec `json:"artifact"`
	SHA256   string       `json:"sha256,omitempty"`
	Size     *int64       `json:"size,omitempty"`
	// Offset is how many bytes the server has; the next chunk must start there.
	Offset  int64     `json:"offset"`
	Creator string    `json:"creator"`
	Created time.Time `json:"created"`
	// Expires is when the session is dropped if no chunk arrives before.
	Expires time.Time `json:"expires"`
}

// FinishUpload completes an upload session.
type FinishUpload struct {
	// SHA256 of the whole content, unless given when the session was created.
	SHA256 string `json:"sha256,omitempty"`
}

// Error is the body of every error answer.
type Error struct {
	// Message says what is wrong and names the field or header at fault.
	Message string `json:"message"`
	// Field is the JSON field, query parameter or header at fault, when there is one.
	Field string `json:"field,omitempty"`
	// ExpectedOffset is set on 409 answers to a chunk sent at the wrong offset.
	ExpectedOffset *int64 `json:"expectedOffset,omitempty"`
	// ExpectedSHA256 and ActualSHA256 are set when the content does not have the stated digest.
	ExpectedSHA256 string `json:"expectedSHA256,omitempty"`
	ActualSHA256   string `json:"actualSHA256,omitempty"`
	// Reason is a CamelCase word saying why an enrollment was refused (TokenExpired,
	// TokenRevoked, TokenUsed, TokenForAnotherSite, CredentialTooPrivileged, …).
	Reason string `json:"reason,omitempty"`
}

// KubeconfigRequest asks for a cluster user's credential for the application cluster of one
// Site (POST /api/v1/namespaces/{namespace}/sites/{site}/kubeconfig).
type KubeconfigRequest struct {
	// CSR is a PEM PKCS#10 certificate signing request for a key the caller keeps; its
	// subject should be empty (the global controller sets the identity).
	CSR string `json:"csr"`
	// TTLSeconds is how long the certificate should live; 0 or more than the global
	// controller's maximum (12 hours unless configured) gives the maximum.
	TTLSeconds int64 `json:"ttlSeconds,omitempty"`
}

// ClusterCredential is the answer to a KubeconfigRequest: what a kubeconfig needs besides the
// caller's private key.
type ClusterCredential struct {
	// Cluster is the application cluster's name (the Site's).
	Cluster string `json:"cluster"`
	// Server is the application cluster's API server URL.
	Server string `json:"server"`
	// CertificateAuthority is the PEM CA bundle the API server's certificate chains to.
	CertificateAuthority string `json:"certificateAuthority"`
	// Certificate is the signed PEM client certificate.
	Certificate string `json:"certificate"`
	// User and Groups are the identity the certificate carries in the application cluster.
	User   string   `json:"user"`
	Groups []string `json:"groups"`
	// ExpirationTime is when the certificate expires (RFC 3339).
	ExpirationTime time.Time `json:"expirationTime"`
}
