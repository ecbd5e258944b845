// Package encryption holds what the Kubernetes API servers edgefleet runs or builds need to keep
// Secrets encrypted at rest in etcd: their EncryptionConfiguration (a KMS v2 provider served by
// edgefleet-kms over Vault's transit engine, or, where no Vault is configured, a secretbox
// provider whose key is made here and kept in the configuration file, outside etcd), the Vault
// policy of the plugin's token, and Reencrypt, which has every stored Secret written again
// under the API server's current key after a key rotation. See docs/security.md.
package encryption
