// Package edgebootstrap is the local controller's Cluster-API bootstrap provider: it reconciles
// EdgeBootstrapConfigs (cloned from EdgeBootstrapConfigTemplates by MachineDeployments) into a
// machine's first-boot data Secret and, once Metal3 provisioned the host, makes the host a node
// of the application cluster. What a host gets is behind the small Bootstrapper interface: the
// Binary Provisioning Agent implements it with real package installs over SSH; test beds
// without hosts run test/sitesim's NodeSimulator in its place, which registers the node itself
// (in a test binary, never in bin/local-controller). A paused config (its Cluster's spec.paused, or the
// cluster.x-k8s.io/paused annotation) only gets its Paused condition set.
package edgebootstrap
