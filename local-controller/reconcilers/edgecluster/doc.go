// Package edgecluster reconciles EdgeClusters, the Cluster-API (v1beta2 contract) infrastructure
// clusters of a site's application clusters. Bare metal needs no cluster-wide infrastructure:
// once Cluster-API's Cluster controller has made the Cluster the EdgeCluster's owner and the
// control-plane endpoint is set, the EdgeCluster reports status.initialization.provisioned=true
// and Ready=True, and Cluster-API copies the endpoint into the Cluster. A paused EdgeCluster
// (its Cluster's spec.paused, or the cluster.x-k8s.io/paused annotation) only gets its Paused
// condition set.
//
// The manager's scheme needs the site kinds (sitev1) and Cluster-API's core kinds
// (sigs.k8s.io/cluster-api/api/core/v1beta2).
package edgecluster
