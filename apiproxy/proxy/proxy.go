// Package proxy forwards TCP connections to the first ready of a list of API servers, TLS
// untouched: the clients verify the API server they reach end to end, so the proxy holds no
// credential and decides only where a connection goes.
//
// Each API server's /readyz is asked every HealthInterval over a new connection (a stopping API
// server fails it while it still serves, then stops accepting connections). A new connection
// goes to the first ready API server in the list, then to the others if it cannot connect; one
// that refuses a connection counts as not ready until its /readyz passes again. An API server
// that stays not ready MoveAfter has the connections through it closed while another is ready,
// so that long-lived clients (a kubelet's one HTTP/2 connection, its watches) move without
// waiting for their own timeouts.
package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Proxy is the node-local endpoint of the API servers.
type Proxy struct {
	opts     Options
	log      *slog.Logger
	backends []*backend
	slots    chan struct{}
	health   *http.Client
}

// backend is one API server and the connections forwarded to it.
type backend struct {
	addr string

	mu            sync.Mutex
	ready         bool
	notReadySince time.Time
	why           string
	conns         map[*pair]struct{}
}

// pair is a forwarded connection: the client's and the API server's ends.
type pair struct {
	client, server net.Conn
	once           sync.Once
}

func (c *pair) close() {
	c.once.Do(func() {
		_ = c.client.Close()
		_ = c.server.Close()
	})
}

// New checks opts and returns a proxy whose API servers count as ready until asked.
func New(opts Options, log *slog.Logger) (*Proxy, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	p := &Proxy{
		opts:  opts,
		log:   log,
		slots: make(chan struct{}, opts.MaxConnections),
		// A routing decision only, never a credential: /readyz is public, and the clients
		// verify the API server through the forwarded stream. A new connection per question,
		// so that one that is no longer accepted counts.
		health: &http.Client{
			Timeout: opts.HealthTimeout,
			Transport: &http.Transport{
				TLSClientConfig:        &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // routing only; see above
				DisableKeepAlives:      true,
				MaxResponseHeaderBytes: 16 << 10,
			},
		},
	}
	for _, addr := range opts.Backends {
		p.backends = append(p.backends, &backend{addr: addr, ready: true, conns: map[*pair]struct{}{}})
	}
	return p, nil
}

// Run listens on opts.Listen and serves until ctx ends.
func Run(ctx context.Context, opts Options, log *slog.Logger) error {
	p, err := New(opts, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return err
	}
	log.Info("forwarding to the API servers", "listen", ln.Addr().String(), "backends", opts.Backends)
	return p.Serve(ctx, ln)
}

// Serve forwards the connections ln accepts until ctx ends, then closes ln and every forwarded
// connection, and returns once they are closed.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { p.watchHealth(ctx) })
	wg.Go(func() {
		<-ctx.Done()
		_ = ln.Close()
	})
	var err error
	for {
		conn, aerr := ln.Accept()
		if aerr != nil {
			if ctx.Err() == nil {
				err = fmt.Errorf("accept: %w", aerr)
			}
			break
		}
		wg.Go(func() { p.handle(ctx, conn) })
	}
	cancel() // closes every forwarded connection (forward)
	wg.Wait()
	return err
}

// handle forwards one client connection, or closes it when no API server takes it.
func (p *Proxy) handle(ctx context.Context, client net.Conn) {
	select {
	case p.slots <- struct{}{}:
		defer func() { <-p.slots }()
	default:
		p.log.Warn("connection refused: too many at once", "client", client.RemoteAddr().String(), "max-connections", p.opts.MaxConnections)
		_ = client.Close()
		return
	}
	var tried []string
	for _, b := range p.order() {
		dctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
		var d net.Dialer
		server, err := d.DialContext(dctx, "tcp", b.addr)
		cancel()
		if err != nil {
			p.setReady(b, err)
			tried = append(tried, err.Error())
			continue
		}
		p.forward(ctx, b, &pair{client: client, server: server})
		return
	}
	p.log.Warn("connection closed: no API server accepted it; check that the API servers of --backend run and are reachable from this host",
		"client", client.RemoteAddr().String(), "tried", strings.Join(tried, "; "))
	_ = client.Close()
}

// order is the backends to try: the ready ones, then the others, each in preference order
// (an API server whose /readyz fails may still serve, and is better than none).
func (p *Proxy) order() []*backend {
	var ready, rest []*backend
	for _, b := range p.backends {
		b.mu.Lock()
		ok := b.ready
		b.mu.Unlock()
		if ok {
			ready = append(ready, b)
		} else {
			rest = append(rest, b)
		}
	}
	return append(ready, rest...)
}

// forward copies both ways until either side ends or ctx does, then closes both.
func (p *Proxy) forward(ctx context.Context, b *backend, c *pair) {
	stop := context.AfterFunc(ctx, c.close)
	defer stop()
	b.mu.Lock()
	b.conns[c] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.conns, c)
		b.mu.Unlock()
	}()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(c.server, c.client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c.client, c.server); done <- struct{}{} }()
	<-done
	c.close()
	<-done
}

// watchHealth asks every API server's /readyz each HealthInterval until ctx ends.
func (p *Proxy) watchHealth(ctx context.Context) {
	t := time.NewTicker(p.opts.HealthInterval)
	defer t.Stop()
	for {
		p.checkAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// checkAll asks every API server at once, then moves the connections off those not ready for
// MoveAfter, if another is ready.
func (p *Proxy) checkAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, b := range p.backends {
		wg.Go(func() { p.setReady(b, p.check(ctx, b)) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	anyReady := false
	for _, b := range p.backends {
		b.mu.Lock()
		anyReady = anyReady || b.ready
		b.mu.Unlock()
	}
	if !anyReady {
		return
	}
	now := time.Now()
	for _, b := range p.backends {
		b.mu.Lock()
		stale := !b.ready && now.Sub(b.notReadySince) >= p.opts.MoveAfter && len(b.conns) > 0
		why, n := b.why, len(b.conns)
		b.mu.Unlock()
		if stale {
			p.log.Info("closing the connections through an API server that is not ready, so that they move to a ready one", "backend", b.addr, "connections", n, "why", why)
			b.closeAll()
		}
	}
}

// check asks one API server's /readyz.
func (p *Proxy) check(ctx context.Context, b *backend) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+b.addr+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := p.health.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /readyz: %s", resp.Status)
	}
	return nil
}

// setReady records what a question or a connection attempt said of b, logging changes.
func (p *Proxy) setReady(b *backend, err error) {
	if errors.Is(err, context.Canceled) {
		return // shutting down
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case err == nil && !b.ready:
		p.log.Info("API server ready again", "backend", b.addr, "after", time.Since(b.notReadySince).Round(time.Millisecond).String())
		b.ready, b.why = true, ""
	case err != nil && b.ready:
		p.log.Warn("API server not ready; new connections try the ready ones first", "backend", b.addr, "why", err.Error())
		b.ready, b.notReadySince, b.why = false, time.Now(), err.Error()
	case err != nil:
		b.why = err.Error()
	}
}

// closeAll closes every connection forwarded to b.
func (b *backend) closeAll() {
	b.mu.Lock()
	conns := make([]*pair, 0, len(b.conns))
	for c := range b.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}
