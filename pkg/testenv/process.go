package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// process is a controller binary run by a Fleet, logging to a file.
type process struct {
	name   string
	log    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// startProcess starts bin with args, appending its output to logPath; g kills it if the test
// binary dies first.
func startProcess(name, bin string, args []string, logPath string, g *guard) (*process, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s not found: run 'make build' first", bin)
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	g.watch([]int{cmd.Process.Pid})
	p := &process{name: name, log: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status is read from cmd.ProcessState
		close(p.exited)
	}()
	return p, nil
}

// waitReady polls readyURL until it answers 200, the process exits, or a minute passes.
func (p *process) waitReady(ctx context.Context, readyURL string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited during start (%s); see %s", p.name, p.cmd.ProcessState, p.log)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if resp, err := http.Get(readyURL); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after 60s; see %s", p.name, p.log)
		}
	}
}

// stop sends SIGTERM, then SIGKILL after 10s. A nil process is stopped already.
func (p *process) stop() error {
	if p == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return errors.New(p.name + " did not stop within 10s of SIGTERM")
	}
}
