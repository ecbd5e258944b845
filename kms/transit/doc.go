// Package transit is the KMS v2 service of edgefleet-kms: it implements the Service of
// k8s.io/kms/pkg/service over one key of Vault's transit engine. The API server sends it only
// its data encryption keys (or their seeds), never the objects themselves: Encrypt wraps one
// with transit/encrypt/<key>, Decrypt unwraps it with transit/decrypt/<key>, and Status reads
// the key's latest version, so the key ID it reports ("<mount>/<key>:v<version>") changes when
// the transit key is rotated and the API server starts a new data encryption key under it.
// Every Vault call carries a deadline; no error carries plaintext.
package transit
