package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// proc reads a process's memory and CPU from /proc.
type proc struct{ pid int }

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat (100 on Linux).
const clockTicks = 100

// resetPeak resets the peak RSS (VmHWM) to the current RSS (Linux ≥ 4.0).
func (p *proc) resetPeak() error {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.pid), []byte("5"), 0); err != nil {
		return fmt.Errorf("reset peak RSS of pid %d: %w", p.pid, err)
	}
	return nil
}

// status reads a "kB" field of /proc/PID/status, in bytes.
func (p *proc) status(field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		return 0, fmt.Errorf("status of pid %d: %w", p.pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("pid %d: %s %q: %w", p.pid, field, v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("pid %d: no %s in /proc status", p.pid, field)
}

// cpu is the user + system CPU time the process used so far.
func (p *proc) cpu() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return 0, fmt.Errorf("stat of pid %d: %w", p.pid, err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	// After the command: state is field 3 of stat, utime 14 and stime 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("stat of pid %d: too few fields", p.pid)
	}
	ut, err1 := strconv.ParseInt(fields[11], 10, 64)
	st, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("stat of pid %d: utime %q stime %q", p.pid, fields[11], fields[12])
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}
