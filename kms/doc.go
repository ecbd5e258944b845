// Command edgefleet-kms is the KMS v2 plugin of the Kubernetes API servers edgefleet runs or
// builds: it serves the KMS v2 gRPC API (k8s.io/kms) on a Unix socket and wraps the API
// server's data encryption keys with a key of Vault's transit engine, so Secrets in etcd are
// encrypted under a key that never leaves Vault. main.go only parses flags and hands over to
// setup; the service itself is transit. See docs/security.md.
package main
