package sshexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// errClosed is returned by steps started after Close.
var errClosed = errors.New("sshexec: executor closed")

// connKey is what a kept connection may be shared by: the same host, at the same address, as the
// same user.
type connKey struct{ name, addr, user string }

// conn is a connection kept for the steps of one host.
type conn struct {
	key    connKey
	client *ssh.Client
	// hostKey is the key the host offered when it was dialed: a step uses the connection only
	// while that is still the key pinned for the host.
	hostKey []byte
	// active counts the steps running on it; idle stops the timer that closes it when none has
	// run for MaxIdle.
	active int
	idle   *time.Timer
	// gone is set once the connection is closed or dropped from the pool.
	gone bool
}

// conns keeps SSH connections between steps: a step takes a connection of its host with room
// (fewer than StepsPerConnection steps on it) or dials a new one, and gives it back when it
// ends. A connection no step has used for MaxIdle is closed, and so is one that breaks.
type conns struct {
	mu     sync.Mutex
	kept   map[connKey][]*conn
	closed bool
}

// take returns a connection of key with room for a step, whose host key is pinned (nil when
// none is kept); the step counts on it until give.
func (p *conns) take(key connKey, pinned ssh.PublicKey, perConn int) (*conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errClosed
	}
	for _, c := range p.kept[key] {
		if c.gone || c.active >= perConn {
			continue
		}
		if pinned == nil || !bytes.Equal(pinned.Marshal(), c.hostKey) {
			// The pin changed (removed for a reprovisioned host, or replaced) since the
			// connection was made: it may not serve steps any more.
			p.dropLocked(c)
			continue
		}
		c.active++
		if c.idle != nil {
			c.idle.Stop()
		}
		return c, nil
	}
	return nil, nil
}

// add keeps a connection just dialed, with the step that dialed it counted on it.
func (p *conns) add(key connKey, client *ssh.Client, hostKey ssh.PublicKey, keep bool) (*conn, error) {
	c := &conn{key: key, client: client, hostKey: hostKey.Marshal(), active: 1}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = client.Close()
		return nil, errClosed
	}
	if keep {
		if p.kept == nil {
			p.kept = map[connKey][]*conn{}
		}
		p.kept[key] = append(p.kept[key], c)
		// A connection the host or the network ends is dropped at once, not found broken by
		// the next step.
		go func() {
			_ = client.Wait()
			p.mu.Lock()
			defer p.mu.Unlock()
			p.dropLocked(c)
		}()
	} else {
		c.gone = true
	}
	return c, nil
}

// give ends a step's use of c. A broken connection is closed; an idle one is closed after
// maxIdle unless a step takes it again.
func (p *conns) give(c *conn, broken bool, maxIdle time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.active--
	if c.gone {
		if c.active == 0 {
			_ = c.client.Close()
		}
		return
	}
	if broken {
		p.dropLocked(c)
		return
	}
	if c.active == 0 {
		c.idle = time.AfterFunc(maxIdle, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if c.active == 0 {
				p.dropLocked(c)
			}
		})
	}
}

// dropLocked removes c from the pool and closes it unless steps still run on it (their give
// closes it then).
func (p *conns) dropLocked(c *conn) {
	if !c.gone {
		c.gone = true
		if c.idle != nil {
			c.idle.Stop()
		}
		list := p.kept[c.key]
		for i, k := range list {
			if k == c {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(p.kept, c.key)
		} else {
			p.kept[c.key] = list
		}
	}
	if c.active == 0 {
		_ = c.client.Close()
	}
}

// close closes every kept connection and refuses new steps; steps still running keep their
// connection until they end.
func (p *conns) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, list := range p.kept {
		for _, c := range list {
			p.dropLocked(c)
		}
	}
}

// newSession opens a session on client within timeout and ctx: a kept connection to a host that
// vanished without closing it would otherwise wait for TCP to give up.
func newSession(ctx context.Context, client *ssh.Client, timeout time.Duration) (*ssh.Session, error) {
	type opened struct {
		s   *ssh.Session
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		s, err := client.NewSession()
		ch <- opened{s, err}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case o := <-ch:
		return o.s, o.err
	case <-ctx.Done():
	case <-t.C:
	}
	// Close the session should it open after all.
	go func() {
		if o := <-ch; o.s != nil {
			_ = o.s.Close()
		}
	}()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("no session opened within %s: %w", timeout, context.DeadlineExceeded)
}
