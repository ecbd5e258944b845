// Package setup wires edgefleet-kms: options and flags, the Vault client (its token from a
// file or $VAULT_TOKEN, never a flag, never logged), the transit service behind the KMS v2 gRPC
// server of k8s.io/kms on a Unix socket only its owner can reach, and the /healthz endpoint,
// which asks the plugin's own socket for its status as the API server does.
package setup
