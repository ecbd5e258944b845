// Package applicationcluster reconciles a site's ApplicationCluster into Metal3 BareMetalHosts
// (one per host, in the reconciler's HostNamespace, beside their BMC Secrets and apart from the
// cluster) and Cluster-API objects: a Cluster with its EdgeCluster, one control-plane
// Machine per control-plane host (bound to it by exact boot MAC) and a worker
// MachineDeployment (machines bound to free worker hosts by label, maxSurge 0). It rolls
// version and image changes through them, control plane first and one host at a time, scales
// in on exactly the removed hosts (deprovisioned or kept, as asked) and writes the compact
// summary the global controller reads into status.
package applicationcluster
