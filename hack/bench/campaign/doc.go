// Command campaign is the Campaign-10k harness of DESIGN.md: it starts a global control plane
// and the real bin/global-controller, creates N simulated sites (testenv.SiteSimulator, which
// talks to the API server as the site reconciler does, with a work time of 0), runs one patch
// campaign over them (1% canaries, a window from 2% doubling per wave up to 20%, abort above 2%
// failures) and reports the orchestration overhead (the campaign's wall time: with a work time
// and soak of 0 there is nothing else to subtract), the per-wave latency from its first dispatch
// to the controller recording the wave finished (p50/p99), the per-site latency from dispatch to
// the site's answer, the controller's peak RSS and CPU. `make bench` runs it at 100, 1,000 and
// 10,000 sites; results go to docs/benchmarks.md.
package main
