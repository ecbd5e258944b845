// Package testfleet runs a whole fleet for the end-to-end suites, the demo and the benchmarks:
// a Fleet is a global control plane with the edgefleet CRDs, site control planes (each keeping
// Secrets encrypted in etcd), and the built binaries running against them — bin/global-controller,
// per site bin/local-controller and bin/bpa — with kubectl and bin/edgefleet as an operator uses
// them. On it: sites registered from manifests (Apply) or by enrollment (Enroll), Metal3 per site
// (StartSiteMetal3), real sites on test hosts (StartRealSite), many simulated sites for
// test/sitesim's ClusterSimulator (RegisterSimulatedSites), Releases of stand-ins or of the real node stack
// (CreateSimulatedReleases, CreateStackRelease), an optional Vault the global controller logs in
// to (FleetOptions.Vault), and the secrets sweep (Sweep): none of the secrets the run made may be
// found in clear in any file the Fleet wrote.
package testfleet
