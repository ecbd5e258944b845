// Package applicationcluster is the Binary Provisioning Agent's reconciler of a site's
// ApplicationClusters: once Metal3 provisioned the cluster's control-plane hosts (their
// Cluster-API Machines carry a provider ID), it installs the cluster's packages, read from the
// site cache by digest, on the hosts over SSH (bpa/cluster: etcd and kube-apiserver on the
// control plane, the node package everywhere), stores the admin kubeconfig as Cluster-API's
// <cluster>-kubeconfig Secret (so Cluster-API sees the nodes), installs the cluster's charts,
// and rolls a later package change through the nodes one at a time (bpa/cluster Patch). It
// writes only status.bootstrap of the ApplicationCluster: the local controller owns the rest.
package applicationcluster
