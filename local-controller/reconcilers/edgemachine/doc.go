// Package edgemachine reconciles EdgeMachines, the Cluster-API (v1beta2 contract) infrastructure
// machines of a site: each binds its Machine to exactly one Metal3 BareMetalHost and has Metal3
// provision it.
//
// The hosts are the BareMetalHosts of the reconciler's HostNamespace, whatever the machines'
// namespace. The reconciler waits for the owner Machine and its bootstrap data, claims a host
// (by exact boot MAC, or the first free host by name carrying the selector's labels) by writing
// the host's consumerRef under an optimistic lock, so that two machines never claim one host,
// and records the host in status. It then writes the image, the Machine's bootstrap data Secret
// as user data and online=true on the host, mirrors Metal3's provisioning state and errors, and
// once the host is provisioned sets spec.providerID, status.addresses and
// status.initialization.provisioned.
// On delete it deprovisions the host and releases it powered off (removalPolicy Deprovision) or
// only releases it (Keep) before the finalizer goes. A paused machine (its Cluster's
// spec.paused, or the cluster.x-k8s.io/paused annotation) only gets its Paused condition set.
// docs/infrastructure-provider.md has the state diagram.
//
// The manager's scheme needs the site kinds (sitev1), Cluster-API's core kinds
// (sigs.k8s.io/cluster-api/api/core/v1beta2) and Metal3's kinds
// (github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1).
package edgemachine
