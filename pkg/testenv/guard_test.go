package testenv

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

const guardChildEnv = "EDGEFLEET_TESTENV_GUARD_CHILD"

// TestGuardKillsOrphans runs a child test binary that starts a control plane and exits without
// stopping it, as a panicking or timed-out test would; the guard must kill its kube-apiserver
// and etcd.
func TestGuardKillsOrphans(t *testing.T) {
	if os.Getenv(guardChildEnv) == "1" {
		cp, err := Start(Options{Name: "orphan"})
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(2)
		}
		var pids []string
		for p := range childPIDs() {
			pids = append(pids, strconv.Itoa(p))
		}
		fmt.Println("PIDS", strings.Join(pids, " "), cp.Name)
		os.Exit(3) // no Stop: the guard has to clean up
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestGuardKillsOrphans$")
	cmd.Env = append(os.Environ(), guardChildEnv+"=1")
	out, _ := cmd.Output()
	var pids []int
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 0 && fields[0] == "PIDS" {
			for _, f := range fields[1 : len(fields)-1] {
				p, _ := strconv.Atoi(f)
				pids = append(pids, p)
			}
		}
	}
	if len(pids) < 2 {
		t.Fatalf("child did not report its kube-apiserver and etcd: %s", out)
	}
	Eventually(t, 30*time.Second, func() error {
		for _, p := range pids {
			if alive(p) {
				return fmt.Errorf("process %d of the dead test binary is still running", p)
			}
		}
		return nil
	})
}

// alive reports whether the process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}
