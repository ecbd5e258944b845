// Package secrets keeps credentials — SSH private keys, BMC passwords, application clusters'
// kubeconfigs — in a secret store, referenced by name, so that they are never written in clear
// to disk or to logs by edgefleet itself.
//
// A Store holds named secrets, each a small map of keys to bytes. Two backends implement it:
//
//   - Vault: HashiCorp Vault's KV version 2 secrets engine, through github.com/hashicorp/vault/api.
//     Each secret is one KV entry at <mount>/data/<prefix>/<name>; values are base64 in the entry
//     (KV stores JSON strings). Delete removes every version and the metadata.
//   - Kubernetes: one Secret of type Opaque per name in a namespace, through a controller-runtime
//     client — the fallback where no Vault is configured. Secrets are only as protected as the
//     cluster keeps them: etcd holds them in clear unless encryption at rest is configured.
//
// main.go picks the backend; consumers depend on Store only (or on a smaller interface of their
// own). Names are DNS-1123 subdomains (lower-case letters, digits, '-' and '.'), valid for both
// backends, for example "site-a.host-1.ssh". Errors name the secret but never carry its data.
package secrets
