// Package cli will be the edgefleet command (cobra, kubectl-style): artifacts, releases and
// campaigns from the terminal, with kubeconfig-based credentials. Until it lands, Sites and Hosts
// are managed with kubectl (see deploy/samples and docs/api.md).
package cli
