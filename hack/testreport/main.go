// Command testreport reads `go test -json` and prints what `go test` alone would print: each
// package's own lines (its "ok"/"FAIL" line, TestMain's output, a timeout's panic) as they come,
// and a test's lines only when it fails. It records each package's result and time in a file;
// with -table it prints those records as one table, slowest first, with each lane's sum.
//
//	go test -json ./... | testreport -record LANE.json -lane main
//	testreport -table LANE.json OTHER.json
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
)

// maxTestOutput bounds what is kept of one running test's output; a failure prints the tail.
const maxTestOutput = 8 << 20

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// record is one package's result, one JSON line of a record file.
type record struct {
	Lane    string  `json:"lane"`
	Package string  `json:"package"`
	Result  string  `json:"result"`
	Seconds float64 `json:"seconds"`
}

func main() {
	recordFile := flag.String("record", "", "filter stdin and append each package's result to this file")
	lane := flag.String("lane", "main", "the lane the recorded packages ran in")
	table := flag.Bool("table", false, "print the records of the files named as arguments as one table")
	flag.Parse()
	var err error
	switch {
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
		case e.Test != "" && e.Action == "fail":
			if b := running[key]; b != nil {
				fmt.Fprint(out, b.String())
			}
			delete(running, key)
		case e.Test != "" && (e.Action == "pass" || e.Action == "skip"):
			delete(running, key)
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

// printTable prints the records of the files, slowest first, then each lane's sum in the order
// of the files. A package without tests is left out.
func printTable(out io.Writer, files []string) error {
	var all []record
	sums := map[string]float64{}
	var lanes []string // in the order of the files
	for _, name := range files {
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
			if _, ok := sums[r.Lane]; !ok {
				lanes = append(lanes, r.Lane)
				sums[r.Lane] = 0
			}
			sums[r.Lane] += r.Seconds
			all = append(all, r)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Seconds > all[j].Seconds })
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "seconds\tresult\tlane\tpackage")
	for _, r := range all {
		fmt.Fprintf(tw, "%7.1f\t%s\t%s\t%s\n", r.Seconds, r.Result, r.Lane, strings.TrimPrefix(r.Package, "github.com/edgefleet/edgefleet/"))
	}
	for _, l := range lanes {
		fmt.Fprintf(tw, "%7.1f\t\t%s\t(sum of the lane's packages)\n", sums[l], l)
	}
	return tw.Flush()
}
