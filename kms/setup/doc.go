// Package setup wires edgefleet-kms: options and flags, the Vault client (pkg/vaultauth: Vault's
// Kubernetes auth method, or a static token for dev servers; never a flag, never logged), the
// transit service behind the KMS v2 gRPC server of k8s.io/kms on a Unix socket only its owner
// can reach, and the /healthz endpoint, which asks the plugin's own socket for its status as
// the API server does.
package setup
