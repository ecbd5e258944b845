package testutil

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// CutProxy forwards TCP connections on loopback to a target and breaks the first connection
// that has carried CutAfter bytes towards the client: a link that fails in the middle of a
// transfer. Later connections pass untouched.
type CutProxy struct {
	// Addr is the proxy's listen address (host:port).
	Addr string

	target     string
	cutAfter   int64
	listener   net.Listener
	downstream atomic.Int64
	cuts       atomic.Int32
	wg         sync.WaitGroup
}

// StartCutProxy listens on a free loopback port and forwards to target (host:port). Close it
// when done.
func StartCutProxy(target string, cutAfter int64) (*CutProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &CutProxy{Addr: l.Addr().String(), target: target, cutAfter: cutAfter, listener: l}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Downstream is how many bytes went from the target to clients, over all connections.
func (p *CutProxy) Downstream() int64 { return p.downstream.Load() }

// Cuts is how many connections the proxy broke (0 or 1).
func (p *CutProxy) Cuts() int { return int(p.cuts.Load()) }

// Close stops accepting and waits for the open connections to end.
func (p *CutProxy) Close() error {
	err := p.listener.Close()
	p.wg.Wait()
	return err
}

func (p *CutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.listener.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

func (p *CutProxy) forward(client net.Conn) {
	defer p.wg.Done()
	defer client.Close()
	upstream, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer upstream.Close()
	go func() {
		_, _ = io.Copy(upstream, client)
		_ = upstream.Close()
	}()
	buf := make([]byte, 32<<10)
	var sent int64
	for {
		n, err := upstream.Read(buf)
		if n > 0 {
			if p.cuts.Load() == 0 && sent+int64(n) > p.cutAfter && p.cuts.CompareAndSwap(0, 1) {
				n = int(p.cutAfter - sent) // deliver up to the cut, then break the link
				w, _ := client.Write(buf[:n])
				p.downstream.Add(int64(w))
				return
			}
			w, werr := client.Write(buf[:n])
			sent += int64(w)
			p.downstream.Add(int64(w))
			if werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a broken connection: either way this one is over
		}
	}
}
