// Package kmsaccount deletes the KMS plugin ServiceAccount of an application cluster that is
// gone (bpa/clusterkms makes one per cluster, in clusterkms.Namespace). Deleting it invalidates
// every token minted for it at once, so a deleted cluster's plugins keep no login to Vault.
package kmsaccount
