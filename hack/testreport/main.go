// Command testreport reads `go test -json` and prints what `go test` alone would print: each
// package's own lines (its "ok"/"FAIL" line, TestMain's output, a timeout's panic) as they come,
// and a test's lines only when it fails. It records each package's result and time in a file;
// with -table it prints those records as one table, slowest first, with each lane's sum, and
// then the top-level tests and ginkgo specs that took slowTest or more (where a package's time
// went). Arguments ending in .ginkgo.json are ginkgo JSON reports (test/testutil.RunSpecs). With
// -sample-cpu it samples the CPU time of every process until it is stopped (SIGTERM), by the
// test package whose binary started it; a table argument ending in .cpu.json prints that
// record after the times (where the machine's two cores went).
//
//	testreport -sample-cpu RUN.cpu.json & go test -json ./... | testreport -record LANE.json -lane main
//	testreport -table LANE.json OTHER.json SUITE.ginkgo.json RUN.cpu.json
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/onsi/ginkgo/v2/types"
)

// maxTestOutput bounds what is kept of one running test's output; a failure prints the tail.
const maxTestOutput = 8 << 20

// slowTest is the time from which a top-level test is recorded on its own.
const slowTest = 30.0

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// record is one package's result, or a slow top-level test's (Test set), one JSON line of a
// record file.
type record struct {
	Lane    string  `json:"lane"`
	Package string  `json:"package"`
	Test    string  `json:"test,omitempty"`
	Result  string  `json:"result"`
	Seconds float64 `json:"seconds"`
}

func main() {
	recordFile := flag.String("record", "", "filter stdin and append each package's result to this file")
	lane := flag.String("lane", "main", "the lane the recorded packages ran in")
	table := flag.Bool("table", false, "print the records of the files named as arguments as one table")
	cpuFile := flag.String("sample-cpu", "", "sample every process's CPU time until SIGTERM, into this file")
	interval := flag.Duration("sample-interval", 5*time.Second, "how often -sample-cpu samples")
	flag.Parse()
	var err error
	switch {
	case *cpuFile != "":
		err = sampleCPU(*cpuFile, *interval)
	case *table:
		err = printTable(os.Stdout, flag.Args())
	case *recordFile != "":
		err = filter(os.Stdin, os.Stdout, *recordFile, *lane)
	default:
		err = errors.New("give -record FILE (filter go test -json from stdin) or -table FILE [FILE...]")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
}

// filter copies the quiet view of the events on in to out and appends one record per package
// to the file named recordFile.
func filter(in io.Reader, out io.Writer, recordFile, lane string) error {
	f, err := os.OpenFile(recordFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open the record file: %w", err)
	}
	defer f.Close()
	records := json.NewEncoder(f)
	running := map[string]*strings.Builder{} // package + "\x00" + test -> its output so far
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			// Not an event (a build error go test printed as text): pass it on.
			fmt.Fprintln(out, sc.Text())
			continue
		}
		key := e.Package + "\x00" + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
		case e.Test != "" && e.Action == "output":
			b := running[key]
			if b == nil {
				b = &strings.Builder{}
				running[key] = b
			}
			if b.Len()+len(e.Output) > maxTestOutput {
				tail := b.String()[b.Len()/2:]
				b.Reset()
				b.WriteString("[... earlier output dropped ...]\n" + tail)
			}
			b.WriteString(e.Output)
		case e.Test != "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			if b := running[key]; b != nil && e.Action == "fail" {
				fmt.Fprint(out, b.String())
			}
			delete(running, key)
			if e.Action != "skip" && !strings.Contains(e.Test, "/") && e.Elapsed >= slowTest {
				if err := records.Encode(record{Lane: lane, Package: e.Package, Test: e.Test, Result: e.Action, Seconds: e.Elapsed}); err != nil {
					return fmt.Errorf("write the record file: %w", err)
				}
			}
		case e.Test == "" && e.Action == "output":
			fmt.Fprint(out, e.Output)
		case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			if e.Action == "fail" {
				// A package that failed without its test failing (a timeout, a panic, TestMain)
				// shows what its unfinished tests printed.
				for k, b := range running {
					if strings.HasPrefix(k, e.Package+"\x00") {
						fmt.Fprintf(out, "--- unfinished %s:\n%s", strings.TrimPrefix(k, e.Package+"\x00"), b.String())
						delete(running, k)
					}
				}
			}
			if err := records.Encode(record{Lane: lane, Package: e.Package, Result: e.Action, Seconds: e.Elapsed}); err != nil {
				return fmt.Errorf("write the record file: %w", err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read go test -json: %w", err)
	}
	return nil
}

// printTable prints the packages' records of the files, slowest first, then each lane's sum in
// the order of the files, then the slow tests' records, slowest first. A package without tests
// is left out.
func printTable(out io.Writer, files []string) error {
	var all, tests []record
	sums := map[string]float64{}
	var lanes []string // in the order of the files
	var reports, cpuFiles []string
	for _, name := range files {
		if strings.HasSuffix(name, ".cpu.json") {
			cpuFiles = append(cpuFiles, name)
			continue
		}
		if strings.HasSuffix(name, ".ginkgo.json") {
			reports = append(reports, name)
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			return fmt.Errorf("read the record file: %w", err)
		}
		dec := json.NewDecoder(strings.NewReader(string(data)))
		for {
			var r record
			if err := dec.Decode(&r); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("read the record file %s: %w", name, err)
			}
			if r.Result == "skip" {
				continue
			}
			if r.Test != "" {
				tests = append(tests, r)
				continue
			}
			if _, ok := sums[r.Lane]; !ok {
				lanes = append(lanes, r.Lane)
				sums[r.Lane] = 0
			}
			sums[r.Lane] += r.Seconds
			all = append(all, r)
		}
	}
	for _, name := range reports {
		specs, err := slowSpecs(name, all)
		if err != nil {
			return err
		}
		tests = append(tests, specs...)
	}
	slowestFirst := func(rs []record) {
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].Seconds > rs[j].Seconds })
	}
	slowestFirst(all)
	slowestFirst(tests)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "seconds\tresult\tlane\tpackage")
	for _, r := range all {
		fmt.Fprintf(tw, "%7.1f\t%s\t%s\t%s\n", r.Seconds, r.Result, r.Lane, strings.TrimPrefix(r.Package, "github.com/edgefleet/edgefleet/"))
	}
	for _, l := range lanes {
		fmt.Fprintf(tw, "%7.1f\t\t%s\t(sum of the lane's packages)\n", sums[l], l)
	}
	if len(tests) > 0 {
		fmt.Fprintf(tw, "\nseconds\tresult\tlane\ttest (top-level tests and ginkgo specs of %.0f s or more)\n", slowTest)
		for _, r := range tests {
			fmt.Fprintf(tw, "%7.1f\t%s\t%s\t%s: %s\n", r.Seconds, r.Result, r.Lane, strings.TrimPrefix(r.Package, "github.com/edgefleet/edgefleet/"), r.Test)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, name := range cpuFiles {
		if err := printCPU(out, name); err != nil {
			return err
		}
	}
	return nil
}

// slowSpecs reads a ginkgo JSON report and returns a record per spec or suite node (BeforeSuite,
// a bed's BeforeAll) that took slowTest or more, its lane that of its package's record in
// packages.
func slowSpecs(name string, packages []record) ([]record, error) {
	data, err := os.ReadFile(name)
	if os.IsNotExist(err) {
		return nil, nil // the suite did not run to its end, or did not run
	}
	if err != nil {
		return nil, fmt.Errorf("read the ginkgo report: %w", err)
	}
	var reports []types.Report
	if err := json.Unmarshal(data, &reports); err != nil {
		return nil, fmt.Errorf("read the ginkgo report %s: %w", name, err)
	}
	var out []record
	for _, rep := range reports {
		pkg, lane := rep.SuitePath, ""
		for _, p := range packages {
			if strings.HasSuffix(rep.SuitePath, "/"+strings.TrimPrefix(p.Package, "github.com/edgefleet/edgefleet/")) {
				pkg, lane = p.Package, p.Lane
			}
		}
		for _, sp := range rep.SpecReports {
			if sp.RunTime.Seconds() < slowTest || sp.State == types.SpecStateSkipped || sp.State == types.SpecStatePending {
				continue
			}
			text := sp.LeafNodeText
			if text == "" {
				text = sp.LeafNodeType.String()
			}
			out = append(out, record{Lane: lane, Package: pkg, Test: text, Result: sp.State.String(), Seconds: sp.RunTime.Seconds()})
		}
	}
	return out, nil
}
