// Package testvault runs a Vault dev server (bin/vault, built by hack/tools.sh) for tests, the
// demo and the test beds: StartVault and its forms start one with a root token made at random
// for the run and kept out of the server's log, optionally over TLS on an address test hosts
// reach (VaultOptions.Host). On it, TransitKey makes a key of the transit engine and
// StartKMSPlugin runs bin/edgefleet-kms over it for a control plane's encryption at rest;
// KubernetesAuth and KubernetesRole set up Vault's Kubernetes auth method against a control plane
// of test/controlplane, as docs/security.md tells an operator to.
package testvault
