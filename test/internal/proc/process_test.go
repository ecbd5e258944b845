package proc

import (
	"path/filepath"
	"syscall"
	"testing"
)

// TestKillOfAnEndedProcess: a process that ended by itself (as a Ctrl-C ends every process of
// the terminal's group) is stopped already, and Kill says so without an error; a running one
// is killed.
func TestKillOfAnEndedProcess(t *testing.T) {
	log := filepath.Join(t.TempDir(), "sleep.log")
	for _, ended := range []bool{true, false} {
		p, err := Start("sleep", "/bin/sleep", []string{"60"}, nil, log)
		if err != nil {
			t.Fatal(err)
		}
		if ended {
			if err := syscall.Kill(p.Cmd.Process.Pid, syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			<-p.Exited
		}
		if err := p.Kill(); err != nil {
			t.Errorf("Kill (ended before: %v): %v", ended, err)
		}
		select {
		case <-p.Exited:
		default:
			t.Errorf("Kill (ended before: %v) returned before the process ended", ended)
		}
	}
}
