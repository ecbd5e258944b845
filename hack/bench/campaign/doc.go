// Command campaign is the Campaign-10k harness of DESIGN.md: it starts a global control plane
// and the real bin/global-controller, registers N sites that all point at one site control
// plane, where a sitesim.ClusterSimulator answers on each site's ApplicationCluster as its local
// controller would (work time 0) — so the global controller's site reconciler pushes and reads
// every site over the real transport, as in production — runs one patch
// campaign over them (1% canaries, a window from 2% doubling per wave up to 20%, abort above 2%
// failures) and reports the orchestration overhead (the campaign's wall time: with a work time
// and soak of 0 there is nothing else to subtract), the per-wave latency from its first dispatch
// to the controller recording the wave finished (p50/p99), the per-site latency from dispatch to
// the verdict recorded on the Site, the controller's peak RSS and CPU. `make bench` runs it at 100, 1,000 and
// 10,000 sites; results go to docs/benchmarks.md.
package main
