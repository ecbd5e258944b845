package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Process is a binary run for a test bed (a controller, Metal3's operator), logging to a file,
// with a guard of its own that kills it if the test binary dies without stopping it.
type Process struct {
	name string
	// Log is the file the output goes to.
	Log string
	// Cmd is the running command.
	Cmd   *exec.Cmd
	guard *Guard
	// Exited is closed once the process has ended.
	Exited chan struct{}
}

// Start starts bin with args, appending its output to logPath. env, when not nil,
// replaces the environment.
func Start(name, bin string, args, env []string, logPath string) (*Process, error) {
	return StartFiltered(name, bin, args, env, logPath, nil)
}

// StartFiltered is Start with the output passed through filter (when not nil)
// on its way to the log, for processes that print what must not reach a file (Vault's dev
// server prints its root token).
func StartFiltered(name, bin string, args, env []string, logPath string, filter func(io.Writer) io.WriteCloser) (*Process, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s not found: run 'make build tools' first", bin)
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var out io.Writer = logFile
	closeOut := func() {}
	if filter != nil {
		// The filter writes to its own handle on the log: logFile is closed on return.
		f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, err
		}
		w := filter(f)
		out = w
		closeOut = func() { _ = w.Close(); _ = f.Close() }
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		closeOut()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &Process{name: name, Log: logPath, Cmd: cmd, guard: StartGuard([]int{cmd.Process.Pid}), Exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status is read from cmd.ProcessState
		closeOut()
		close(p.Exited)
	}()
	return p, nil
}

// WaitReady polls readyURL until it answers 200, the process exits, or a minute passes; the
// errors carry the end of the log.
func (p *Process) WaitReady(ctx context.Context, readyURL string) error {
	return p.WaitReadyWith(ctx, readyURL, &http.Client{Timeout: 2 * time.Second})
}

// WaitReadyWith is WaitReady asking with hc (an https URL's CA).
func (p *Process) WaitReadyWith(ctx context.Context, readyURL string, hc *http.Client) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.Exited:
			return fmt.Errorf("%s exited during start (%s); end of %s:\n%s", p.name, p.Cmd.ProcessState, p.Log, p.LogTail(20))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := hc.Get(readyURL); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after 60s; end of %s:\n%s", p.name, p.Log, p.LogTail(20))
		}
	}
}

// Stop sends SIGTERM (and SIGCONT, in case it is paused), then SIGKILL after 10s, and
// releases the guard. A nil process is stopped already.
func (p *Process) Stop() error {
	if p == nil {
		return nil
	}
	defer p.guard.Release()
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	_ = p.Cmd.Process.Signal(syscall.SIGCONT) // a paused process must run to handle SIGTERM
	select {
	case <-p.Exited:
		return nil
	case <-time.After(10 * time.Second):
		_ = p.Cmd.Process.Kill()
		<-p.Exited
		return errors.New(p.name + " did not stop within 10s of SIGTERM")
	}
}

// Pause freezes the process (SIGSTOP): it keeps its state and its listening sockets, whose
// connections the kernel still accepts, and answers nothing until Resume.
func (p *Process) Pause() error {
	if err := p.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pause %s: %w", p.name, err)
	}
	// The signal is delivered asynchronously: a thread running on another CPU can still
	// answer a request after kill returns. Paused means every thread has stopped.
	deadline := time.Now().Add(10 * time.Second)
	for {
		running, err := runningThreads(p.Cmd.Process.Pid)
		if err != nil {
			return fmt.Errorf("pause %s: %w", p.name, err)
		}
		if running == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pause %s: %d threads still not stopped 10s after SIGSTOP", p.name, running)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runningThreads counts the threads of pid not in the stopped state ('T' in /proc's stat).
func runningThreads(pid int) (int, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	running := 0
	for _, t := range tasks {
		stat, err := os.ReadFile(dir + "/" + t.Name() + "/stat")
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread ended
		}
		if err != nil {
			return 0, err
		}
		// pid (comm) state ...: comm may hold spaces and parentheses, the state follows the last ')'.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 || i+2 >= len(stat) {
			return 0, fmt.Errorf("%s/%s/stat: unexpected %q", dir, t.Name(), stat)
		}
		if stat[i+2] != 'T' {
			running++
		}
	}
	return running, nil
}

// Resume lets a paused process go on (SIGCONT).
func (p *Process) Resume() error {
	if err := p.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("resume %s: %w", p.name, err)
	}
	return nil
}

// Kill sends SIGKILL and waits for the process to end. A nil process, or one that ended
// already (a Ctrl-C reaches every process of the terminal's group), is stopped already.
func (p *Process) Kill() error {
	if p == nil {
		return nil
	}
	defer p.guard.Release()
	if err := p.Cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", p.name, err)
	}
	<-p.Exited
	return nil
}

// LogTail returns the last n lines of the log.
func (p *Process) LogTail(n int) string {
	f, err := os.Open(p.Log)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	const maxTail = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > maxTail {
		_, _ = f.Seek(-maxTail, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
