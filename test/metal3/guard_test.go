package metal3

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/internal/proc"
	"github.com/edgefleet/edgefleet/test/testutil"
)

const (
	guardChildEnv     = "EDGEFLEET_TESTENV_GUARD_CHILD"
	guardMetal3DirEnv = "EDGEFLEET_TESTENV_GUARD_METAL3_DIR"
)

// TestGuardKillsOrphans runs a child test binary that starts a control plane and Metal3's
// operator (a process of the test bed, like the controllers) and exits without stopping them,
// as a panicking or timed-out test would: the guards must kill kube-apiserver, etcd and bmo.
func TestGuardKillsOrphans(t *testing.T) {
	if os.Getenv(guardChildEnv) == "1" {
		cp, err := controlplane.Start(controlplane.Options{Name: "orphan"})
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(2)
		}
		m, err := Start(t.Context(), cp, Options{Namespaces: []string{"metal3"}, Dir: os.Getenv(guardMetal3DirEnv)})
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(2)
		}
		fmt.Println("BMO", m.proc.Cmd.Process.Pid)
		var pids []string
		for p := range proc.ChildPIDs() {
			pids = append(pids, strconv.Itoa(p))
		}
		fmt.Println("PIDS", strings.Join(pids, " "))
		os.Exit(3) // no Stop: the guards have to clean up
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestGuardKillsOrphans$")
	cmd.Env = append(os.Environ(), guardChildEnv+"=1", guardMetal3DirEnv+"="+t.TempDir())
	out, _ := cmd.Output()
	var bmo int
	var pids []int
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) == 2 && fields[0] == "BMO":
			bmo, _ = strconv.Atoi(fields[1])
		case len(fields) > 0 && fields[0] == "PIDS":
			for _, f := range fields[1:] {
				p, _ := strconv.Atoi(f)
				pids = append(pids, p)
			}
		}
	}
	if bmo == 0 || !slices.Contains(pids, bmo) || len(pids) < 3 {
		t.Fatalf("child did not report bmo among its kube-apiserver, etcd and bmo: %s", out)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, p := range pids {
			if alive(p) {
				return fmt.Errorf("process %d of the dead test binary is still running (bmo is %d)", p, bmo)
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
