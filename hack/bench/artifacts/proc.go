package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/edgefleet/edgefleet/test/testutil"
)

// controller is the running bin/global-controller process, whose memory the benchmark reads.
type controller struct{ pid int }

// findController finds bin/global-controller among this process's children (testfleet.Fleet
// starts it and does not expose its PID).
func findController() (*controller, error) {
	root, err := testutil.RepoRoot()
	if err != nil {
		return nil, err
	}
	bin, err := filepath.EvalSymlinks(filepath.Join(root, "bin", "global-controller"))
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// The fields after the command name, which is in parentheses and may hold spaces.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(self) {
			continue
		}
		dir := filepath.Dir(path)
		if exe, err := os.Readlink(filepath.Join(dir, "exe")); err == nil && exe == bin {
			pid, _ := strconv.Atoi(filepath.Base(dir))
			return &controller{pid: pid}, nil
		}
	}
	return nil, fmt.Errorf("no child process runs %s", bin)
}

// resetPeak resets the process's peak RSS (VmHWM) to its current RSS (Linux ≥ 4.0).
func (c *controller) resetPeak() error {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", c.pid), []byte("5"), 0); err != nil {
		return fmt.Errorf("reset peak RSS of the global controller (pid %d): %w", c.pid, err)
	}
	return nil
}

// peak is the process's peak RSS in bytes since start or the last resetPeak.
func (c *controller) peak() (int64, error) { return c.status("VmHWM") }

// rss is the process's current RSS in bytes.
func (c *controller) rss() (int64, error) { return c.status("VmRSS") }

func (c *controller) status(field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.pid))
	if err != nil {
		return 0, fmt.Errorf("global controller (pid %d) status: %w", c.pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("global controller (pid %d): %s %q: %w", c.pid, field, v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no " + field + " in /proc/" + strconv.Itoa(c.pid) + "/status")
}
