package proc

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Guard kills a control plane's processes if this process dies without stopping them. It is a
// shell in its own session that collects PIDs from a pipe; the pipe closes when this process
// exits for any reason, and the shell then kills what it collected. Release ends the shell
// without killing anything, once the processes were stopped the normal way.
type Guard struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

const guardScript = `pids=; while read -r p; do pids="$pids $p"; done; [ -n "$pids" ] && kill -9 $pids 2>/dev/null; exit 0`

// StartGuard starts a guard of pids.
func StartGuard(pids []int) *Guard {
	cmd := exec.Command("/bin/sh", "-c", guardScript)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return &Guard{}
	}
	if err := cmd.Start(); err != nil {
		return &Guard{}
	}
	g := &Guard{cmd: cmd, stdin: stdin}
	g.Watch(pids)
	return g
}

// Watch adds pids to what the guard kills.
func (g *Guard) Watch(pids []int) {
	if g.stdin == nil {
		return
	}
	for _, p := range pids {
		fmt.Fprintln(g.stdin, p)
	}
}

// Release ends the guard without killing anything.
func (g *Guard) Release() {
	if g.cmd == nil {
		return
	}
	_ = g.cmd.Process.Kill()
	_ = g.stdin.Close()
	_ = g.cmd.Wait()
}

// ChildPIDs lists the PIDs of this process's children.
func ChildPIDs() map[int]bool {
	self := os.Getpid()
	out := map[int]bool{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// Fields after the command name, which is in parentheses and may hold spaces.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == self {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			out[pid] = true
		}
	}
	return out
}

// NewPIDs are the PIDs of after that are not in before.
func NewPIDs(before, after map[int]bool) []int {
	var pids []int
	for p := range after {
		if !before[p] {
			pids = append(pids, p)
		}
	}
	return pids
}
