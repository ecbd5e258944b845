// Package setup wires the Binary Provisioning Agent: options and flags, the secret store
// (Vault, or Kubernetes Secrets), the BPA's SSH key (made once, kept in the store, its public
// half published for the local controller), the SSH executor pinning host keys in the store,
// and the manager running the ApplicationCluster reconciler on the site's local cluster.
package setup
