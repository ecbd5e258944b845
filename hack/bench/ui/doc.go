// Command ui is the web UI's benchmark: it starts a global control plane, registers 10,000
// Sites with statuses of every state (as the global controller writes them: Ready, patching,
// degraded, unreachable), runs the web UI exactly as the global controller wires it
// (setup.UI: gin, the kubeauth reviewer, an informer cache of the sites) behind HTTPS, and asks
// it for pages as a fleet viewer would: the overview, and the site list filtered, sorted and
// paged on the server. Each page's p50/p99 is reported against the anchor measured in the same
// process: one list of 50 Sites straight from the API server (what `kubectl get sites
// --chunk-size=50` costs for its first page). `make bench` runs it; results go to
// docs/benchmarks.md.
package main
