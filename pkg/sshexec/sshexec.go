package sshexec

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// HostKeyStore keeps the host key pinned for each host.
type HostKeyStore interface {
	// Get returns the key pinned for host, or nil (and no error) when none is.
	Get(ctx context.Context, host string) (ssh.PublicKey, error)
	// Pin records key as host's key.
	Pin(ctx context.Context, host string, key ssh.PublicKey) error
}

// Target is a host to run steps on.
type Target struct {
	// Name identifies the host: its key is pinned under this name. Required.
	Name string
	// Addr is host:port of its SSH server.
	Addr string
	// User to log in as; "root" when empty.
	User string
}

// Step is one command to run on a host.
type Step struct {
	// Name identifies the step in results and errors.
	Name string
	// Command is run by the login shell of the host's user.
	Command string
	// Check, when set, runs first: exit status 0 means the step is done already and Command is
	// skipped; any other exit status runs Command.
	Check string
	// Stdin, when set, is opened each time Command runs and fed to it (then closed): a step
	// run on many hosts reads it once per host. Bytes wraps a byte slice.
	Stdin Source
	// Timeout bounds the step (Check and Command together, including connecting); the
	// executor's DefaultTimeout when zero.
	Timeout time.Duration
}

// Source opens the standard input of a step's command.
type Source func() (io.ReadCloser, error)

// Bytes is a Source of b.
func Bytes(b []byte) Source {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

// Result is what a step did on one host.
type Result struct {
	Host string
	Step string
	// Skipped is true when Check said the step was done already.
	Skipped bool
	// ExitStatus of Command (0 when skipped).
	ExitStatus int
	// Stdout and Stderr hold the last MaxOutput bytes Command wrote to each.
	Stdout, Stderr []byte
	// StdoutDropped and StderrDropped count the bytes written before those.
	StdoutDropped, StderrDropped int64
	// Duration from connecting to the step's end.
	Duration time.Duration
}

// Options configure an Executor. Zero values pick the defaults.
type Options struct {
	// DefaultTimeout bounds steps without a timeout of their own; 5 minutes when zero.
	DefaultTimeout time.Duration
	// DialTimeout bounds connecting and the SSH handshake; 15 seconds when zero.
	DialTimeout time.Duration
	// MaxOutput is how many bytes of each of stdout and stderr are kept; 64 KiB when zero.
	MaxOutput int
	// Parallelism is how many hosts RunAll works on at once; 10 when zero.
	Parallelism int
	// StepsPerConnection is how many steps may run at once on one kept connection to a host
	// (each takes a session, and sshd allows 10 by default); 4 when zero.
	StepsPerConnection int
	// MaxIdle is how long a connection no step uses is kept for the host's next step; 60
	// seconds when zero. Negative: no connection is kept, each step dials its own.
	MaxIdle time.Duration
}

// Executor runs steps on hosts over SSH. Close it when done: it keeps connections.
type Executor struct {
	signer ssh.Signer
	keys   HostKeyStore
	opts   Options
	conns  conns
}

// New returns an Executor that logs in with signer and pins host keys in keys.
func New(signer ssh.Signer, keys HostKeyStore, opts Options) *Executor {
	if opts.DefaultTimeout <= 0 {
		opts.DefaultTimeout = 5 * time.Minute
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 15 * time.Second
	}
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = 64 << 10
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = 10
	}
	if opts.StepsPerConnection <= 0 {
		opts.StepsPerConnection = 4
	}
	if opts.MaxIdle == 0 {
		opts.MaxIdle = time.Minute
	}
	return &Executor{signer: signer, keys: keys, opts: opts}
}

// Close closes the connections kept for later steps; steps started after it fail, steps
// running keep their connection until they end.
func (e *Executor) Close() { e.conns.close() }

// ParseSigner makes a Signer from a PEM or OpenSSH private key held in memory (as read from the
// secret store). The error never quotes the key.
func ParseSigner(privateKey []byte) (ssh.Signer, error) {
	s, err := ssh.ParsePrivateKey(privateKey)
	if err != nil {
		return nil, fmt.Errorf("parse SSH private key: %w", err)
	}
	return s, nil
}

// UnreachableError is a host the executor could not connect to: not booted yet, its sshd not
// started, or no route to it.
type UnreachableError struct {
	Host, Addr string
	Err        error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("host %s: connect to %s: %v", e.Host, e.Addr, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// HostKeyError is returned when a host offers a key other than the one pinned for it.
type HostKeyError struct {
	Host string
	// Pinned and Offered are SHA256 fingerprints.
	Pinned, Offered string
}

func (e *HostKeyError) Error() string {
	return fmt.Sprintf("host %s offered host key %s, but %s is pinned for it: refusing to connect (if the host was reprovisioned, remove its pinned key)",
		e.Host, e.Offered, e.Pinned)
}

// ExitError is returned when a step's command exits non-zero.
type ExitError struct {
	Host, Step string
	Status     int
	// Stderr is the end of the command's standard error.
	Stderr []byte
}

func (e *ExitError) Error() string {
	const show = 512
	tail := e.Stderr
	if len(tail) > show {
		tail = tail[len(tail)-show:]
	}
	return fmt.Sprintf("host %s: step %s: exit status %d: %s", e.Host, e.Step, e.Status, bytes.TrimSpace(tail))
}

// Run runs step on target. The error is a *HostKeyError, an *ExitError, or wraps
// context.DeadlineExceeded when the step's timeout passed; the result holds what was captured
// in every case.
func (e *Executor) Run(ctx context.Context, target Target, step Step) (res Result, err error) {
	res = Result{Host: target.Name, Step: step.Name}
	if target.Name == "" {
		return res, errors.New("sshexec: target without a name")
	}
	timeout := step.Timeout
	if timeout <= 0 {
		timeout = e.opts.DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()

	c, reused, err := e.connect(ctx, target)
	if err != nil {
		return res, err
	}
	broken := false
	defer func() {
		if c != nil { // nil when a redial failed: the broken connection was given back then
			e.conns.give(c, broken, e.opts.MaxIdle)
		}
	}()
	// session runs a command of the step; the first one to find a kept connection broken (it
	// opens no session: the host rebooted, or dropped it) dials again, once.
	first := true
	session := func(command string, stdin Source) output {
		out := e.run(ctx, c.client, command, stdin)
		if out.noSession && reused && first && ctx.Err() == nil {
			e.conns.give(c, true, e.opts.MaxIdle)
			c, err = e.dialConn(ctx, target)
			if err != nil {
				c = nil
				return output{stdout: newTailBuffer(1), stderr: newTailBuffer(1), err: err, dialFailed: true}
			}
			out = e.run(ctx, c.client, command, stdin)
		}
		first = false
		// A connection that opened no session is not trusted with another step.
		broken = broken || out.broken || out.noSession
		return out
	}

	if step.Check != "" {
		check := session(step.Check, nil)
		if check.dialFailed {
			return res, check.err
		}
		if ctx.Err() != nil {
			return res, fmt.Errorf("host %s: step %s: check: %s: %w", target.Name, step.Name, stopped(ctx, timeout), ctx.Err())
		}
		if check.err == nil {
			res.Skipped = true
			return res, nil
		}
		var exit *ssh.ExitError
		if !errors.As(check.err, &exit) {
			return res, fmt.Errorf("host %s: step %s: check: %w", target.Name, step.Name, check.err)
		}
	}
	out := session(step.Command, step.Stdin)
	if out.dialFailed {
		return res, out.err
	}
	res.Stdout, res.StdoutDropped = out.stdout.bytes()
	res.Stderr, res.StderrDropped = out.stderr.bytes()
	if ctx.Err() != nil {
		return res, fmt.Errorf("host %s: step %s: %s: %w", target.Name, step.Name, stopped(ctx, timeout), ctx.Err())
	}
	var exit *ssh.ExitError
	switch {
	case out.err == nil:
		return res, nil
	case errors.As(out.err, &exit):
		res.ExitStatus = exit.ExitStatus()
		return res, &ExitError{Host: target.Name, Step: step.Name, Status: res.ExitStatus, Stderr: res.Stderr}
	default:
		return res, fmt.Errorf("host %s: step %s: %w", target.Name, step.Name, out.err)
	}
}

// stopped says why a step's context is done.
func stopped(ctx context.Context, timeout time.Duration) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "timed out after " + timeout.String()
	}
	return "cancelled"
}

// TargetResult is the outcome of a step on one host of RunAll.
type TargetResult struct {
	Result
	Err error
}

// RunAll runs step on every target, at most Parallelism at once, and returns the outcomes in
// the order of targets. Each host gets the step's full timeout.
func (e *Executor) RunAll(ctx context.Context, targets []Target, step Step) []TargetResult {
	results := make([]TargetResult, len(targets))
	sem := make(chan struct{}, e.opts.Parallelism)
	var wg sync.WaitGroup
	for i, t := range targets {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			results[i] = TargetResult{Result: Result{Host: t.Name, Step: step.Name}, Err: fmt.Errorf("host %s: step %s: not started: %w", t.Name, step.Name, ctx.Err())}
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			r, err := e.Run(ctx, t, step)
			results[i] = TargetResult{Result: r, Err: err}
		})
	}
	wg.Wait()
	return results
}

// connect returns a connection to target for a step: a kept one with room when its host key is
// still the pinned one (reused true), or a new one.
func (e *Executor) connect(ctx context.Context, target Target) (c *conn, reused bool, err error) {
	pinned, err := e.keys.Get(ctx, target.Name)
	if err != nil {
		return nil, false, fmt.Errorf("host %s: read pinned host key: %w", target.Name, err)
	}
	if e.opts.MaxIdle > 0 {
		c, err = e.conns.take(keyOf(target), pinned, e.opts.StepsPerConnection)
		if c != nil || err != nil {
			return c, c != nil, err
		}
	}
	c, err = e.dialPinned(ctx, target, pinned)
	return c, false, err
}

// dialConn dials a new connection to target for a step.
func (e *Executor) dialConn(ctx context.Context, target Target) (*conn, error) {
	pinned, err := e.keys.Get(ctx, target.Name)
	if err != nil {
		return nil, fmt.Errorf("host %s: read pinned host key: %w", target.Name, err)
	}
	return e.dialPinned(ctx, target, pinned)
}

func (e *Executor) dialPinned(ctx context.Context, target Target, pinned ssh.PublicKey) (*conn, error) {
	client, hostKey, err := e.dial(ctx, target, pinned)
	if err != nil {
		return nil, err
	}
	return e.conns.add(keyOf(target), client, hostKey, e.opts.MaxIdle > 0)
}

func keyOf(t Target) connKey { return connKey{name: t.Name, addr: t.Addr, user: userOf(t)} }

func userOf(t Target) string {
	if t.User == "" {
		return "root"
	}
	return t.User
}

// dial connects to target, checking its host key against pinned (pinning the offered one when
// nil), and returns the host key it was offered.
func (e *Executor) dial(ctx context.Context, target Target, pinned ssh.PublicKey) (*ssh.Client, ssh.PublicKey, error) {
	var offered ssh.PublicKey
	check := e.checkHostKey(ctx, target.Name, pinned)
	cfg := &ssh.ClientConfig{
		User: userOf(target),
		Auth: []ssh.AuthMethod{ssh.PublicKeys(e.signer)},
		HostKeyCallback: func(hostname string, remote net.Addr, key ssh.PublicKey) error {
			offered = key
			return check(hostname, remote, key)
		},
		Timeout: e.opts.DialTimeout,
	}
	if pinned != nil {
		// Ask for the pinned key's type, so that a host holding several keys offers that one.
		cfg.HostKeyAlgorithms = hostKeyAlgorithms(pinned.Type())
	}
	dialCtx, cancel := context.WithTimeout(ctx, e.opts.DialTimeout)
	defer cancel()
	d := net.Dialer{}
	conn, err := d.DialContext(dialCtx, "tcp", target.Addr)
	if err != nil {
		if ctx.Err() != nil { // the caller gave up: not the host's doing
			return nil, nil, fmt.Errorf("host %s: connect to %s: %w (%w)", target.Name, target.Addr, ctx.Err(), err)
		}
		if dialCtx.Err() != nil || isTimeout(err) {
			err = fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
		}
		return nil, nil, &UnreachableError{Host: target.Name, Addr: target.Addr, Err: err}
	}
	if deadline, ok := dialCtx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	c, chans, reqs, err := ssh.NewClientConn(conn, target.Addr, cfg)
	if err != nil {
		_ = conn.Close()
		var hk *HostKeyError
		if errors.As(err, &hk) {
			return nil, nil, hk
		}
		if isTimeout(err) {
			return nil, nil, fmt.Errorf("host %s: SSH handshake with %s: %w (%w)", target.Name, target.Addr, context.DeadlineExceeded, err)
		}
		return nil, nil, fmt.Errorf("host %s: SSH handshake with %s: %w", target.Name, target.Addr, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return ssh.NewClient(c, chans, reqs), offered, nil
}

// isTimeout tells whether a network error is a deadline passing. Such errors do not wrap
// context.DeadlineExceeded, and the dialer may return one before the context's own timer has
// marked the context done.
func isTimeout(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}

// checkHostKey pins the first key a host offers and refuses any other later.
func (e *Executor) checkHostKey(ctx context.Context, host string, pinned ssh.PublicKey) ssh.HostKeyCallback {
	return func(_ string, _ net.Addr, offered ssh.PublicKey) error {
		if pinned == nil {
			if err := e.keys.Pin(ctx, host, offered); err != nil {
				return fmt.Errorf("host %s: pin host key %s: %w", host, ssh.FingerprintSHA256(offered), err)
			}
			return nil
		}
		if !bytes.Equal(pinned.Marshal(), offered.Marshal()) {
			return &HostKeyError{Host: host, Pinned: ssh.FingerprintSHA256(pinned), Offered: ssh.FingerprintSHA256(offered)}
		}
		return nil
	}
}

// hostKeyAlgorithms lists the signature algorithms for a host key of keyType.
func hostKeyAlgorithms(keyType string) []string {
	if keyType == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256}
	}
	return []string{keyType}
}

type output struct {
	stdout, stderr *tailBuffer
	err            error
	// noSession: the connection opened no session, so the command never started.
	noSession bool
	// broken: the connection may not serve other steps (the host did not answer the kill of
	// a timed-out command).
	broken bool
	// dialFailed: a new connection could not be made; err says why.
	dialFailed bool
}

// stepEnv marks every process of a step's command in its environment, so that a timed-out
// command can be found and killed: OpenSSH refuses signal requests in sessions of root
// ("session signalling requires privilege separation"), and ending the session leaves a
// command without a terminal running.
const stepEnv = "EDGEFLEET_SSHEXEC_STEP"

// killScript kills the processes whose environment holds the marker given as $1.
const killScript = `for p in /proc/[0-9]*; do grep -qzx "` + stepEnv + `=$1" "$p/environ" 2>/dev/null && kill -KILL "${p#/proc/}" 2>/dev/null; done; true`

// answerWithin bounds the wait for a host to kill a timed-out command and end its session; a
// host that does not answer in time loses the connection (often it is why the step timed out).
const answerWithin = 5 * time.Second

// run runs command in a new session of client and waits for it to end or for ctx to be done;
// then it kills the command (a signal request, and the processes carrying its marker, through
// a second session). The connection stays for other steps unless the host does not answer.
func (e *Executor) run(ctx context.Context, client *ssh.Client, command string, stdin Source) output {
	out := output{stdout: newTailBuffer(e.opts.MaxOutput), stderr: newTailBuffer(e.opts.MaxOutput)}
	raw := make([]byte, 12)
	if _, err := rand.Read(raw); err != nil {
		out.err = fmt.Errorf("step marker: %w", err)
		return out
	}
	marker := hex.EncodeToString(raw)
	s, err := newSession(ctx, client, e.opts.DialTimeout)
	if err != nil {
		out.err = fmt.Errorf("open session: %w", err)
		out.noSession = true
		return out
	}
	defer s.Close()
	s.Stdout, s.Stderr = out.stdout, out.stderr
	if stdin != nil {
		in, err := stdin()
		if err != nil {
			out.err = fmt.Errorf("open standard input: %w", err)
			return out
		}
		defer in.Close()
		s.Stdin = in
	}
	if err := s.Start("export " + stepEnv + "=" + marker + "\n" + command); err != nil {
		out.err = fmt.Errorf("start command: %w", err)
		return out
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case out.err = <-done:
		return out
	case <-ctx.Done():
	}
	_ = s.Signal(ssh.SIGKILL)
	var ended error // how the session ended, once killed
	answered := killMarked(client, marker)
	if answered {
		select {
		case ended = <-done:
		case <-time.After(answerWithin):
			answered = false
		}
	}
	if !answered {
		_ = client.Close()
		out.broken = true
		ended = <-done
	}
	out.err = ctx.Err()
	if ended != nil {
		out.err = fmt.Errorf("%w (session: %w)", ctx.Err(), ended)
	}
	return out
}

// killMarked kills the processes of a step on the host, best effort, and tells whether the
// host answered within answerWithin.
func killMarked(client *ssh.Client, marker string) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s, err := client.NewSession()
		if err != nil {
			return
		}
		defer s.Close()
		_ = s.Run("sh -c '" + killScript + "' kill " + marker)
	}()
	select {
	case <-done:
		return true
	case <-time.After(answerWithin):
		return false
	}
}

// tailBuffer keeps the last max bytes written to it and counts the ones it dropped.
type tailBuffer struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped int64
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if len(p) > b.max {
		b.dropped += int64(len(p) - b.max)
		p = p[len(p)-b.max:]
	}
	if over := len(b.buf) + len(p) - b.max; over > 0 {
		b.dropped += int64(over)
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	b.buf = append(b.buf, p...)
	return n, nil
}

func (b *tailBuffer) bytes() ([]byte, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf), b.dropped
}
