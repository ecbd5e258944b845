// Package clusterkms gives an application cluster what its KMS plugin needs to encrypt the
// cluster's Secrets through Vault (cluster.Spec.KMS): the cluster's transit key, made in Vault
// when missing, and a ServiceAccount token of the site's cluster for Vault's Kubernetes auth
// method — the plugin's own ServiceAccount, one per cluster, in a namespace of their own
// (Namespace) — minted again once half its life is gone. The operator sets up Vault once per
// site (docs/security.md): the auth method reviewing the site cluster's tokens, the plugin's
// role bound to the ServiceAccounts edgefleet-kms-* of that namespace, its policy, and the
// BPA's right to make the transit keys.
package clusterkms
