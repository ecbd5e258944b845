// Package sitesim simulates sites for tests and benchmarks of what the global side does with
// many of them: ClusterSimulator answers, on one site control plane, the ApplicationClusters the
// global controller pushes to many sites as their local controllers would (over the real
// transport; with Bootstrap, also their hosts, nodes, packages and charts), and
// FakeSiteReconciler plays the sites' side of campaigns by writing Site.status.lastOperation, for
// the campaign reconciler's own tests. They provision nothing.
package sitesim
