package main

import (
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/edgefleet/edgefleet/bpa/cluster"
)

// seedLimit is the seed requirement: a 10-server site installed in under 10 minutes.
const seedLimit = 10 * time.Minute

// designRatio is DESIGN.md's target: total ≤ 1.3 × the slowest host's own install path.
const designRatio = 1.3

// report prints the results as markdown, for docs/benchmarks.md.
func report(w io.Writer, site *siteResult, anc *anchorResult, machine string, load []string) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	var size int64
	names := map[string][]string{}
	for _, a := range site.stack {
		size += a.Size
		names[a.Kind] = append(names[a.Kind], a.Name)
	}
	p("\n## Site-10, %s\n", time.Now().Format("2006-01-02 15:04"))
	p("Machine: %s. Load average (1/5/15 min) at the start, after the site, after the anchor: %s.", machine, strings.Join(load, "; "))
	p("Release: %d artifacts, %.0f MiB: an OS image of %d MiB of random bytes, the real node stack's packages (%s), images (%s) and charts (%s).",
		len(site.stack), mib(size), osImageSize>>20, strings.Join(names["binary-package"], ", "), strings.Join(names["container-image-archive"], ", "), strings.Join(names["helm-chart"], ", "))
	p("Application: %s.\n", site.serving)

	at := map[string]time.Duration{}
	p("| milestone | since spec.cluster was set |")
	p("|---|---:|")
	for _, m := range site.milestones {
		at[m.name] = m.at
		p("| %s | %s |", m.name, dur(m.at))
	}
	if _, ok := at[msSiteReports]; !ok {
		p("| %s | not within %s of the end |", msSiteReports, siteReportGrace)
	}

	p("\n| phase | from → to | took |")
	p("|---|---|---:|")
	// A phase runs from the last of its from milestones ("" is spec.cluster set) to its to.
	phase := func(name, to string, from ...string) {
		fromName, f := "spec.cluster set", time.Duration(0)
		for _, m := range from {
			if at[m] >= f {
				fromName, f = m, at[m]
			}
		}
		p("| %s | %s → %s | %s |", name, fromName, to, dur(at[to]-f))
	}
	phase("push + cache", msCached)
	phase("provisioning + boot (alongside the cache)", msSSH)
	phase("BPA install: the packages on every host", msCharts, msInstalling, msSSH)
	phase("charts + application serving", msServing, msCharts)
	p("| **total** | spec.cluster set → every node Ready and the application serving | **%s** |", dur(site.total))

	p("\nPer host (times since spec.cluster was set; CPU since boot, memory once the application served):\n")
	p("| host | booted | answers SSH | node Ready | CPU | memory with page cache | resident |")
	p("|---|---:|---:|---:|---:|---:|---:|")
	var siteCPU time.Duration
	for _, m := range site.hosts {
		siteCPU += m.cpu
		p("| %s | %s | %s | %s | %s | %.0f MiB | %.0f MiB |", m.name, dur(site.booted[m.name]), dur(site.ssh[m.name]), dur(site.ready[m.name]), dur(m.cpu), mib(m.usage), mib(m.resident))
	}
	for _, cp := range []bool{true, false} {
		var usage, rss, maxUsage, maxRSS int64
		n := 0
		for _, m := range site.hosts {
			if m.controlPlane == cp {
				n++
				usage, rss = usage+m.usage, rss+m.resident
				maxUsage, maxRSS = max(maxUsage, m.usage), max(maxRSS, m.resident)
			}
		}
		role := "control plane"
		if !cp {
			role = "worker"
		}
		if n > 0 {
			p("| %s, mean (max) | | | | | %.0f MiB (%.0f) | %.0f MiB (%.0f) |", role, mib(usage)/float64(n), mib(maxUsage), mib(rss)/float64(n), mib(maxRSS))
		}
	}

	var critical, bpaTook, failed time.Duration
	siteSteps := map[string]time.Duration{}
	p("\nThe BPA's install, level by level (its log's `installed level` lines; a pass that fails is retried after --retry-interval, 2 s):\n")
	p("| level | packages | hosts | took | slowest host/package | steps that ran: time by kind, summed over the hosts |")
	p("|---:|---|---:|---:|---|---|")
	for _, l := range site.levels {
		name := fmt.Sprint(l.index)
		bpaTook += l.took
		if l.complete {
			critical += l.slowestTook
		} else {
			name += " (failed)"
			failed += l.took
		}
		for k, d := range l.steps {
			siteSteps[k] += d
		}
		p("| %s | %s | %d | %s | %s %s | %d: %s |", name, l.packages, l.hosts, dur(l.took), l.slowest, dur(l.slowestTook), l.stepsRan, stepTimes(l.steps))
	}
	if anc != nil {
		p("\nThe anchor, level by level (cluster.Result; one call at a time, etcd's members together):\n")
		p("| level | packages | took | slowest host/package | steps that ran: time by kind, summed over the hosts |")
		p("|---:|---|---:|---|---|")
		for i, l := range anc.res.Levels {
			s := l.Slowest()
			p("| %d | %s | %s | %s/%s %s | %d: %s |", i, strings.Join(l.Packages, ","), dur(l.Took), s.Host, s.Package, dur(s.Took), l.Ran(), stepTimes(l.StepTimes()))
		}
	}

	overhead := site.total - critical
	p("\n| what | measured |")
	p("|---|---:|")
	p("| **total**: spec.cluster set → every node Ready and the application serving | **%s** |", dur(site.total))
	p("| seed requirement: under %s | %s |", seedLimit, holds(site.total < seedLimit))
	p("| BPA's install passes (Σ of their levels' wall times) | %s |", dur(bpaTook))
	p("| of which passes that failed at a level and were retried | %s |", dur(failed))
	p("| install and health checks on the critical path (Σ of each installed level's slowest host/package) | %s |", dur(critical))
	p("| orchestration overhead (total − critical path) | %s (%.0f %% of total) |", dur(overhead), 100*ratio(overhead, site.total))
	install, health := split(siteSteps)
	p("| package installs, summed over hosts and levels (write, stage, pre-install, prune, import) | %s |", dur(install))
	p("| starts and health checks, summed over hosts and levels (activate: units started until healthy) | %s |", dur(health))
	p("| the hosts' CPU time, boot to serving (÷ %d CPUs) | %s (%s) |", runtime.NumCPU(), dur(siteCPU), dur(siteCPU/time.Duration(runtime.NumCPU())))
	if anc != nil {
		host, own := slowestHost(anc.own)
		ancSteps := map[string]time.Duration{}
		for _, l := range anc.res.Levels {
			for k, d := range l.StepTimes() {
				ancSteps[k] += d
			}
		}
		ai, ah := split(ancSteps)
		p("| **anchor**: the same install one call at a time (etcd's members together) | **%s** |", dur(anc.took))
		p("| anchor: package installs / starts and health checks, summed | %s / %s |", dur(ai), dur(ah))
		p("| anchor: the hosts' CPU time during its install | %s |", dur(anc.cpu))
		p("| parallel ÷ sequential: BPA's install passes ÷ anchor | %.2f |", ratio(bpaTook, anc.took))
		p("| total ÷ anchor | %.2f |", ratio(site.total, anc.took))
		p("| slowest host's own install path, alone (the anchor's %s) | %s |", host, dur(own))
		p("| total ÷ slowest host's own path (DESIGN.md: ≤ %.1f) | %.2f (%s) |", designRatio, ratio(site.total, own), holds(ratio(site.total, own) <= designRatio))
		p("\nEach host's own install path in the anchor (its calls' time through the gate):\n")
		var cells []string
		for _, name := range hostNames() {
			cells = append(cells, fmt.Sprintf("%s %s", name, dur(anc.own[name])))
		}
		p("%s.", strings.Join(cells, ", "))
	}
}

// split sums step times into package installs (everything but activate) and starts with their
// health checks (activate).
func split(steps map[string]time.Duration) (install, health time.Duration) {
	for k, d := range steps {
		if k == "activate" {
			health += d
		} else {
			install += d
		}
	}
	return install, health
}

func holds(ok bool) string {
	if ok {
		return "holds"
	}
	return "does not hold"
}

// stepTimes lists step times in the order a job runs them.
func stepTimes(times map[string]time.Duration) string {
	var out []string
	kinds := cluster.StepKinds()
	for _, k := range slices.Sorted(maps.Keys(times)) {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	for _, k := range kinds {
		if d, ok := times[k]; ok {
			out = append(out, k+" "+dur(d))
		}
	}
	return strings.Join(out, ", ")
}

func slowestHost(own map[string]time.Duration) (string, time.Duration) {
	var name string
	var longest time.Duration
	for h, d := range own {
		if d > longest || (d == longest && h < name) {
			name, longest = h, d
		}
	}
	return name, longest
}

func dur(d time.Duration) string {
	if d >= time.Minute {
		return fmt.Sprintf("%dm %04.1fs", int(d.Minutes()), (d % time.Minute).Seconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
