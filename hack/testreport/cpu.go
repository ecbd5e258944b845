package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/prometheus/procfs"
)

// userHZ is the unit of the CPU times in /proc/PID/stat (USER_HZ, 100 on Linux).
const userHZ = 100

// noPackage names the CPU of processes that no test binary started: the go tool's compilers
// and linkers, make, the lanes' shells.
const noPackage = "(no test: building, the lanes)"

// cpuRecord is what -sample-cpu writes: the machine's CPU time over the sampling, and the CPU
// time of the processes, by the test package that started them (the package directory of the
// nearest *.test ancestor) and program (the process's comm).
type cpuRecord struct {
	Seconds float64  `json:"seconds"` // wall time sampled
	Cores   int      `json:"cores"`
	Busy    float64  `json:"busy"` // CPU seconds the machine was busy (not idle or waiting for I/O)
	Use     []cpuUse `json:"use"`
}

type cpuUse struct {
	Package string  `json:"package"`
	Program string  `json:"program"`
	Seconds float64 `json:"seconds"`
}

// procInfo is one process at one sample.
type procInfo struct {
	ppid int
	// start is when the process started, in ticks after boot: with the PID, its identity.
	start uint64
	comm  string
	// pkg is the package directory of a test binary (a process named *.test), "" for others.
	pkg string
	// cpu is its own CPU time, children that of its children it reaped, in seconds.
	cpu, children float64
}

// snapshot is every process at one sample, by PID.
type snapshot map[int]procInfo

// cpuAccount adds up, from one snapshot to the next, the CPU time each package's processes
// used. A process's CPU time counts from the first snapshot; one that exited between two
// snapshots counts up to the last that saw it, and the rest of what it used (and what its own
// short-lived children used) is counted at its parent once the parent reaped it.
type cpuAccount struct {
	last snapshot
	use  map[cpuUse]float64 // key without Seconds
}

// packageOf is the package of the nearest test binary among pid and its ancestors in s.
func (s snapshot) packageOf(pid int) string {
	for range 64 { // deeper than any process tree here; a cycle of PIDs reused ends too
		p, ok := s[pid]
		if !ok {
			return noPackage
		}
		if p.pkg != "" {
			return p.pkg
		}
		pid = p.ppid
	}
	return noPackage
}

// add counts what the processes used since the last snapshot. The first snapshot only sets
// the baseline.
func (a *cpuAccount) add(s snapshot) {
	if a.use == nil {
		a.use = map[cpuUse]float64{}
	}
	if a.last == nil {
		a.last = s
		return
	}
	// The processes gone since the last snapshot, by parent: each one's CPU time as last seen,
	// with what its own children used up to then and those of them gone since, is counted
	// already, and is in its parent's reaped children's time now.
	goneKids := map[int][]int{}
	for pid, old := range a.last {
		if p, ok := s[pid]; !ok || p.start != old.start {
			goneKids[old.ppid] = append(goneKids[old.ppid], pid)
		}
	}
	var counted func(pid, depth int) float64
	counted = func(pid, depth int) float64 {
		old := a.last[pid]
		sum := old.cpu + old.children
		if depth < 64 { // deeper than any process tree here; PIDs reused may make a cycle
			for _, kid := range goneKids[pid] {
				sum += counted(kid, depth+1)
			}
		}
		return sum
	}
	gone := map[int]float64{} // parent PID -> its children's counted time
	for parent, kids := range goneKids {
		if p, ok := s[parent]; ok && p.start == a.last[parent].start {
			for _, kid := range kids {
				gone[parent] += counted(kid, 0)
			}
		}
	}
	for pid, p := range s {
		cpu, children := p.cpu, p.children
		if old, ok := a.last[pid]; ok && old.start == p.start {
			cpu -= old.cpu
			children -= old.children
		}
		pkg := s.packageOf(pid)
		if cpu > 0 {
			a.use[cpuUse{Package: pkg, Program: p.comm}] += cpu
		}
		if rest := children - gone[pid]; rest > 0.005 {
			a.use[cpuUse{Package: pkg, Program: p.comm + " (exited children)"}] += rest
		}
	}
	a.last = s
}

// uses returns what add counted, most first.
func (a *cpuAccount) uses() []cpuUse {
	var out []cpuUse
	for k, v := range a.use {
		k.Seconds = v
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Seconds != out[j].Seconds {
			return out[i].Seconds > out[j].Seconds
		}
		return out[i].Package+out[i].Program < out[j].Package+out[j].Program
	})
	return out
}

// readSnapshot reads every process of fs. A test binary (an executable named *.test) has its
// package: its working directory (go test runs it in the package's directory) relative to
// root; what prev knew of a process is not read again.
func readSnapshot(fs procfs.FS, root string, prev snapshot) (snapshot, error) {
	procs, err := fs.AllProcs()
	if err != nil {
		return nil, fmt.Errorf("list the processes: %w", err)
	}
	s := snapshot{}
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil {
			continue // exited since the listing
		}
		info := procInfo{ppid: st.PPID, start: st.Starttime, comm: st.Comm, cpu: st.CPUTime(),
			children: float64(st.CUTime+st.CSTime) / userHZ}
		if old, ok := prev[p.PID]; ok && old.start == st.Starttime {
			info.pkg = old.pkg
		} else if exe, err := p.Executable(); err == nil && strings.HasSuffix(exe, ".test") {
			if cwd, err := p.Cwd(); err == nil {
				if rel, err := filepath.Rel(root, cwd); err == nil && !strings.HasPrefix(rel, "..") {
					info.pkg = rel
				} else {
					info.pkg = cwd
				}
			}
		}
		s[p.PID] = info
	}
	return s, nil
}

// busySeconds is how long the machine's CPUs were busy since boot, and how many there are.
func busySeconds(fs procfs.FS) (float64, int, error) {
	st, err := fs.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("read /proc/stat: %w", err)
	}
	t := st.CPUTotal
	return t.User + t.Nice + t.System + t.IRQ + t.SoftIRQ + t.Steal, len(st.CPU), nil
}

// sampleCPU samples the processes every interval until SIGTERM or SIGINT, writing the record
// to file after each write interval and at the end (so a lane killed outright leaves most).
func sampleCPU(file string, interval time.Duration) error {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return err
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	busy0, cores, err := busySeconds(fs)
	if err != nil {
		return err
	}
	start := time.Now()
	var acct cpuAccount
	write := func() error {
		busy, _, err := busySeconds(fs)
		if err != nil {
			return err
		}
		rec := cpuRecord{Seconds: time.Since(start).Seconds(), Cores: cores, Busy: busy - busy0, Use: acct.uses()}
		data, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, file)
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for n := 0; ; n++ {
		s, err := readSnapshot(fs, root, acct.last)
		if err != nil {
			return err
		}
		acct.add(s)
		if n%6 == 5 {
			if err := write(); err != nil {
				return err
			}
		}
		select {
		case <-stop:
			if s, err = readSnapshot(fs, root, acct.last); err != nil {
				return err
			}
			acct.add(s)
			return write()
		case <-tick.C:
		}
	}
}

// topPrograms is how many programs a package's row names.
const topPrograms = 4

// printCPU prints the CPU record in file: the machine's use, then each package's CPU time,
// most first, with the programs that used most of it.
func printCPU(out io.Writer, file string) error {
	data, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the CPU record: %w", err)
	}
	var rec cpuRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return fmt.Errorf("read the CPU record %s: %w", file, err)
	}
	byPackage := map[string][]cpuUse{}
	totals := map[string]float64{}
	var counted float64
	for _, u := range rec.Use { // most first
		byPackage[u.Package] = append(byPackage[u.Package], u)
		totals[u.Package] += u.Seconds
		counted += u.Seconds
	}
	var pkgs []string
	for p := range totals {
		pkgs = append(pkgs, p)
	}
	sort.Slice(pkgs, func(i, j int) bool { return totals[pkgs[i]] > totals[pkgs[j]] })
	fmt.Fprintf(out, "\nCPU: %d cores busy %.0f of %.0f CPU-seconds (%.0f%%) over %.0f s; by test package (the processes a test binary started, sampled from /proc), %.0f CPU-s counted\n",
		rec.Cores, rec.Busy, rec.Seconds*float64(rec.Cores), 100*rec.Busy/max(1, rec.Seconds*float64(rec.Cores)), rec.Seconds, counted)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "cpu-s\tshare\tpackage: its programs, most first")
	for _, p := range pkgs {
		var progs []string
		for i, u := range byPackage[p] {
			if i == topPrograms {
				progs = append(progs, "…")
				break
			}
			progs = append(progs, fmt.Sprintf("%s %.0f", u.Program, u.Seconds))
		}
		fmt.Fprintf(tw, "%7.0f\t%4.1f%%\t%s: %s\n", totals[p], 100*totals[p]/max(1, counted), p, strings.Join(progs, ", "))
	}
	return tw.Flush()
}
