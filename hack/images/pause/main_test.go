package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgefleet/edgefleet/test/testutil"
)

// TestPause runs pause as PID 1 of a new PID namespace (needs root), as a pod's sandbox is: a
// process orphaned in the namespace is adopted by pause and reaped when it exits (no zombie
// stays), and SIGTERM makes pause exit 0.
func TestPause(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a PID namespace needs root")
	}
	bin := filepath.Join(t.TempDir(), "pause")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v: %s", err, out)
	}
	// unshare forks pause into the namespace and exits with its status.
	cmd := exec.Command("unshare", "--pid", "--fork", "--kill-child", bin)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var pause int
	testutil.WaitFor(t, 10*time.Second, "pause started by unshare", func() (bool, string) {
		kids := children(cmd.Process.Pid)
		if len(kids) == 1 {
			pause = kids[0]
		}
		return pause != 0, fmt.Sprintf("children of unshare: %v", kids)
	})

	// A shell in pause's namespace starts a sleep and exits at once: the sleep is orphaned, and
	// its parent becomes the namespace's init, pause.
	if out, err := exec.Command("nsenter", "--target", strconv.Itoa(pause), "--pid", "sh", "-c", "sleep 2 >/dev/null 2>&1 & exit 0").CombinedOutput(); err != nil {
		t.Fatalf("nsenter: %v: %s", err, out)
	}
	var orphan int
	testutil.WaitFor(t, 10*time.Second, "pause adopting the orphan", func() (bool, string) {
		kids := children(pause)
		if len(kids) == 1 {
			orphan = kids[0]
		}
		return orphan != 0, fmt.Sprintf("children of pause: %v", kids)
	})
	testutil.WaitFor(t, 10*time.Second, "the orphan reaped once it exited", func() (bool, string) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", orphan))
		return len(children(pause)) == 0 && errors.Is(err, fs.ErrNotExist), fmt.Sprintf("children of pause: %v; the orphan: %s", children(pause), stat)
	})

	if err := syscall.Kill(pause, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("pause after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pause did not exit on SIGTERM")
	}
}

// children are the processes whose parent is pid (field 4 of /proc/<pid>/stat), zombies
// included.
func children(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // gone
		}
		// pid (comm) state ppid ...: comm may hold spaces, not ')'.
		_, rest, _ := strings.Cut(string(b), ") ")
		if fields := strings.Fields(rest); len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			n, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			out = append(out, n)
		}
	}
	return out
}
