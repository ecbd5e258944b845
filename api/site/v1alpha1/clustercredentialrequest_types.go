package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons a ClusterCredentialRequest is refused (status.reason when status.certificate is empty).
const (
	// CredentialReasonClusterNotInstalled means the BPA has no installed application cluster of
	// that name (no PKI or admin kubeconfig yet).
	CredentialReasonClusterNotInstalled = "ClusterNotInstalled"
	// CredentialReasonInvalidRequest means the CSR or the identity cannot be signed: bad
	// signature, a subject other than the spec's, a system: identity, an expiry in the past or
	// beyond the BPA's maximum. The message says which.
	CredentialReasonInvalidRequest = "InvalidRequest"
	// CredentialReasonSigningFailed means the cluster's CA could not be read or could not sign.
	CredentialReasonSigningFailed = "SigningFailed"
)

// ClusterCredentialRequestSpec is what the global controller asks the BPA to sign: a client
// certificate for one identity in one application cluster, for the public key of a CSR whose
// private key stays with the user.
type ClusterCredentialRequestSpec struct {
	// Cluster is the name of the ApplicationCluster (in the request's namespace).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Cluster string `json:"cluster"`
	// CSR is a PEM "CERTIFICATE REQUEST" (PKCS#10). Only its public key is used, after its
	// signature is checked; its subject must be empty or the one given here.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=16384
	// +required
	CSR string `json:"csr"`
	// User is the certificate's common name: the user name inside the application cluster.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('system:')",message="a cluster user can never be a system: identity"
	// +required
	User string `json:"user"`
	// Groups are the certificate's organizations: the user's groups inside the application
	// cluster.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.all(g, !g.startsWith('system:'))",message="a cluster user can never be in a system: group"
	// +optional
	Groups []string `json:"groups,omitempty"`
	// ExpirationTime is the certificate's NotAfter.
	// +required
	ExpirationTime metav1.Time `json:"expirationTime"`
}

// ClusterCredentialRequestStatus is the BPA's answer: a certificate, or why not.
type ClusterCredentialRequestStatus struct {
	// Certificate is the signed client certificate, PEM.
	// +optional
	Certificate string `json:"certificate,omitempty"`
	// CertificateAuthority is the PEM CA bundle the application cluster's API server serves
	// with, for the kubeconfig.
	// +optional
	CertificateAuthority string `json:"certificateAuthority,omitempty"`
	// Server is the application cluster's API server URL.
	// +optional
	Server string `json:"server,omitempty"`
	// Reason is set when the request is refused; Message says why.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message explains Reason.
	// +optional
	Message string `json:"message,omitempty"`
}

// ClusterCredentialRequest asks the BPA for a short-lived client certificate of an application
// cluster. The global controller creates one per kubeconfig it issues, reads the answer and
// deletes it; the BPA answers each once.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=edgefleet
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name="User",type=string,JSONPath=`.spec.user`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterCredentialRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   ClusterCredentialRequestSpec   `json:"spec"`
	Status ClusterCredentialRequestStatus `json:"status,omitempty"`
}

// Answered reports whether the BPA answered: a certificate or a refusal.
func (r *ClusterCredentialRequest) Answered() bool {
	return r.Status.Certificate != "" || r.Status.Reason != ""
}

// ClusterCredentialRequestList is a list of ClusterCredentialRequests.
//
// +kubebuilder:object:root=true
type ClusterCredentialRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterCredentialRequest `json:"items"`
}
