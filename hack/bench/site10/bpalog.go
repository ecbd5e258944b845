package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// bpaLevel is one level of an install as the BPA logs it ("installed level" or "level not
// installed"; see docs/bpa.md, Logs).
type bpaLevel struct {
	at       time.Time
	complete bool
	index    int
	packages string
	hosts    int
	took     time.Duration
	slowest  string
	// slowestTook is the level's longest job: its share of the install's critical path.
	slowestTook time.Duration
	stepsRan    int
	// steps is the time of the level's steps that ran, by kind, summed over its hosts.
	steps map[string]time.Duration
}

// readBPALevels reads the BPA's JSON log lines of install levels logged at or after since
// (the log's times have whole seconds).
func readBPALevels(path string, since time.Time) ([]bpaLevel, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []bpaLevel
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			TS, Msg                              string
			Index, Hosts, StepsRan               int
			Packages, Took, Slowest, SlowestTook string
			StepTimes                            string
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || (line.Msg != "installed level" && line.Msg != "level not installed") {
			continue
		}
		l := bpaLevel{complete: line.Msg == "installed level", index: line.Index, packages: line.Packages, hosts: line.Hosts,
			slowest: line.Slowest, stepsRan: line.StepsRan, steps: map[string]time.Duration{}}
		if l.at, err = time.Parse(time.RFC3339, line.TS); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if l.at.Before(since.Truncate(time.Second)) {
			continue
		}
		if l.took, err = time.ParseDuration(line.Took); err != nil {
			return nil, fmt.Errorf("%s: took: %w", path, err)
		}
		if l.slowestTook, err = time.ParseDuration(line.SlowestTook); err != nil {
			return nil, fmt.Errorf("%s: slowestTook: %w", path, err)
		}
		for _, kd := range strings.Split(line.StepTimes, ", ") {
			kind, d, ok := strings.Cut(kd, " ")
			if !ok {
				continue
			}
			if l.steps[kind], err = time.ParseDuration(d); err != nil {
				return nil, fmt.Errorf("%s: stepTimes %q: %w", path, line.StepTimes, err)
			}
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no install level logged since %s", path, since.Format(time.RFC3339))
	}
	return out, nil
}
