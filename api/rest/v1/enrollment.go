package v1

import "time"

// CreateEnrollmentToken asks for a new enrollment token of a site
// (POST /api/v1/namespaces/{namespace}/sites/{site}/enrollment-tokens).
type CreateEnrollmentToken struct {
	// TTL is how long the token stays valid, as a Go duration ("4h"); the controller's default
	// when empty, at most its maximum.
	TTL string `json:"ttl,omitempty"`
}

// EnrollmentToken describes an issued token. Token is set only in the answer to its creation:
// the controller keeps a hash of the secret part, never the secret.
type EnrollmentToken struct {
	// ID is the token's public part, also its name in listings.
	ID        string `json:"id"`
	Namespace string `json:"namespace"`
	Site      string `json:"site"`
	// Token is "<id>.<secret>", shown once.
	Token     string    `json:"token,omitempty"`
	CreatedBy string    `json:"createdBy,omitempty"`
	Created   time.Time `json:"created"`
	Expires   time.Time `json:"expires"`
	// State is Valid, Expired, Revoked or Used.
	State EnrollmentTokenState `json:"state"`
	// UsedBy is the fingerprint of the site cluster that enrolled with the token (sha256 of its
	// CA certificate), and Machine the name the enrolling machine gave.
	UsedBy  string     `json:"usedBy,omitempty"`
	Machine string     `json:"machine,omitempty"`
	Used    *time.Time `json:"used,omitempty"`
}

// EnrollmentTokenState is where a token is in its life.
type EnrollmentTokenState string

// Token states.
const (
	TokenValid   EnrollmentTokenState = "Valid"
	TokenExpired EnrollmentTokenState = "Expired"
	TokenRevoked EnrollmentTokenState = "Revoked"
	TokenUsed    EnrollmentTokenState = "Used"
)

// EnrollmentTokenList is the answer of GET .../enrollment-tokens.
type EnrollmentTokenList struct {
	Items []EnrollmentToken `json:"items"`
}

// Enroll is the body of POST /api/v1/enroll, sent by a site's first boot with its enrollment
// token in the Authorization header.
type Enroll struct {
	// Namespace and Site name the Site the machine was built for.
	Namespace string `json:"namespace"`
	Site      string `json:"site"`
	// Machine is the enrolling machine's name (its hostname), for events and listings.
	Machine string `json:"machine"`
	// Kubeconfig is the least-privilege credential of the global controller on the site's
	// cluster: inline credentials only, with the cluster's CA certificate.
	Kubeconfig string `json:"kubeconfig"`
}

// Enrolled is the answer to a successful enrollment.
type Enrolled struct {
	Namespace string `json:"namespace"`
	Site      string `json:"site"`
	// Secret is the Secret the kubeconfig was stored in (the Site's spec.kubeconfigSecretRef),
	// or empty when it was stored in Vault.
	Secret string `json:"secret,omitempty"`
	// VaultEntry is the Vault entry the kubeconfig was stored in (the Site's
	// spec.kubeconfigVaultRef), or empty when it was stored in a Secret.
	VaultEntry string `json:"vaultEntry,omitempty"`
	// Fingerprint identifies the enrolled site cluster (sha256 of its CA certificate).
	Fingerprint string `json:"fingerprint"`
}
