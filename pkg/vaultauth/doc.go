// Package vaultauth gives a component an authenticated Vault client (*vaultapi.Client) and
// keeps its token alive.
//
// Two methods:
//
//   - kubernetes (production): the component logs in at auth/<mount>/login with its Vault
//     role and its ServiceAccount token, read from a file (the projected token by default),
//     through vault/api's auth/kubernetes helper, and gets a short-lived Vault token limited to
//     its role's policy. A LifetimeWatcher renews that token while Vault lets it; when the token
//     can no longer be renewed (its max TTL is near), a renewal fails, or the ServiceAccount
//     token file changes, the component logs in again, with a bounded backoff while that fails.
//   - token (dev servers and tests only): a static token from a file or $VAULT_TOKEN, used as
//     it is and never renewed.
//
// Every call to Vault has a deadline (the client's timeout). Tokens, ServiceAccount tokens
// included, are never logged and never part of an error.
package vaultauth
