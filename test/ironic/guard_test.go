package ironic

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgefleet/edgefleet/test/testutil"
)

const (
	guardChildEnv = "EDGEFLEET_IRONIC_GUARD_CHILD"
	guardDirEnv   = "EDGEFLEET_IRONIC_GUARD_DIR"
)

// TestGuardKillsOrphans runs a child test binary that starts Ironic and exits without stopping
// it, as a panicking or timed-out test would: the guard must end unshare, and with it Ironic and
// its namespace, so that the port stops answering and nothing of the tree stays mounted.
func TestGuardKillsOrphans(t *testing.T) {
	if os.Getenv(guardChildEnv) == "1" {
		ir, err := Start(t.Context(), Options{Dir: os.Getenv(guardDirEnv)})
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(2)
		}
		child, err := childPID(ir.proc.Cmd.Process.Pid)
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(2)
		}
		fmt.Println("IRONIC", ir.proc.Cmd.Process.Pid, child, ir.URL)
		os.Exit(3) // no Stop: the guard has to clean up
	}
	if os.Geteuid() != 0 {
		t.Skip("ironic: needs root (mount namespace, chroot)")
	}
	root, err := tree("")
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestGuardKillsOrphans$")
	cmd.Env = append(os.Environ(), guardChildEnv+"=1", guardDirEnv+"="+t.TempDir())
	out, _ := cmd.Output()
	var pids []int
	var url string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 4 && f[0] == "IRONIC" {
			for _, s := range f[1:3] {
				p, _ := strconv.Atoi(s)
				pids = append(pids, p)
			}
			url = f[3]
		}
	}
	if len(pids) != 2 || pids[0] == 0 || pids[1] == 0 {
		t.Fatalf("child did not report unshare and Ironic: %s", out)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, p := range pids {
			if alive(p) {
				return fmt.Errorf("process %d of the dead test binary is still running (unshare, Ironic: %v)", p, pids)
			}
		}
		return nil
	})
	hc := &http.Client{Timeout: 2 * time.Second}
	if resp, err := hc.Get(url + "/"); err == nil {
		resp.Body.Close()
		t.Errorf("%s still answers (%s) after the test binary that started it died", url, resp.Status)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), root) {
		t.Errorf("something of %s is mounted on the host:\n%s", root, mounts)
	}
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
