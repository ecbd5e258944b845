// Package site reconciles Site objects: it loads each site's kubeconfig from its Secret (as
// untrusted input), keeps a client per site, probes the site's API server on a heartbeat with
// backoff while it is unreachable, counts the site's hosts, and reports all of it as the
// KubeconfigValid, Reachable and Ready conditions, with an event on every condition change.
//
// When spec.cluster is set it also pushes the site's desired application cluster: one
// ApplicationCluster, named after the Site, built from spec.cluster and the site's Ready Hosts,
// into namespace edgefleet-system on the site, and one Secret per host with its BMC credentials,
// into namespace edgefleet-hosts (the only one where the global controller may touch Secrets).
// Each object is read first and written only when it differs, so a steady site sees no write. The
// ApplicationCluster's status is read back on every heartbeat (no watch across clusters) and
// mirrored into status.cluster and the ClusterReady condition; ClusterSynced says whether the
// push went through. Removing spec.cluster deletes the ApplicationCluster, then the Secrets once
// the site has taken the cluster down. Phases live in site_phases.go and cluster_phases.go; the
// objects are built without I/O in cluster_desired.go.
package site
