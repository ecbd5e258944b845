package realhosts_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/edgefleet/edgefleet/test/testhosts"
)

// hostFile is a file on a test host.
type hostFile struct {
	h    *testhosts.Host
	file string
}

// readLeaf is the certificate in f, now (read within 10 s).
func readLeaf(ctx context.Context, f hostFile) (*x509.Certificate, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := f.h.Exec(ctx, "cat", f.file)
	if err != nil {
		return nil, fmt.Errorf("%s of %s: %w: %s", f.file, f.h.Name, err, out)
	}
	block, _ := pem.Decode(out)
	if block == nil {
		return nil, fmt.Errorf("%s of %s: no PEM block", f.file, f.h.Name)
	}
	return x509.ParseCertificate(block.Bytes)
}

// seenLeaf is a certificate seen in a file, and when it was first seen there (at most a poll
// after it was put there).
type seenLeaf struct {
	cert *x509.Certificate
	at   time.Time
}

// leafLog is each file's certificates in the order they were seen, polled every 2 seconds.
type leafLog struct {
	newCA   string // the issuer ofNew selects
	mu      sync.Mutex
	seen    map[hostFile][]seenLeaf
	cancel  context.CancelFunc
	stopped chan struct{}
}

// watchLeaves polls files until stop or ctx's end. A file that cannot be read or parsed (a
// host busy, a file being replaced) is read again at the next poll.
func watchLeaves(ctx context.Context, files []hostFile, newCA string) *leafLog {
	ctx, cancel := context.WithCancel(ctx)
	l := &leafLog{newCA: newCA, seen: map[hostFile][]seenLeaf{}, cancel: cancel, stopped: make(chan struct{})}
	go func() {
		defer close(l.stopped)
		for {
			for _, f := range files {
				c, err := readLeaf(ctx, f)
				if err != nil {
					continue
				}
				l.mu.Lock()
				if h := l.seen[f]; len(h) == 0 || h[len(h)-1].cert.SerialNumber.Cmp(c.SerialNumber) != 0 {
					l.seen[f] = append(h, seenLeaf{cert: c, at: time.Now()})
				}
				l.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
		}
	}()
	return l
}

// stop ends the polling, and waits for it.
func (l *leafLog) stop() {
	l.cancel()
	<-l.stopped
}

// of is every certificate seen in f.
func (l *leafLog) of(f hostFile) []seenLeaf {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]seenLeaf(nil), l.seen[f]...)
}

// ofNew is the certificates seen in f that the new CA issued.
func (l *leafLog) ofNew(f hostFile) []seenLeaf {
	var out []seenLeaf
	for _, s := range l.of(f) {
		if s.cert.Issuer.CommonName == l.newCA {
			out = append(out, s)
		}
	}
	return out
}

// String says what was seen in f: issuer, serial, validity and when seen, for a failure's message.
func (l *leafLog) String(f hostFile) string {
	var b strings.Builder
	for _, s := range l.of(f) {
		fmt.Fprintf(&b, "[%s #%x %s–%s seen %s] ", s.cert.Issuer.CommonName, s.cert.SerialNumber.Uint64()&0xffffffff,
			s.cert.NotBefore.Format(time.TimeOnly), s.cert.NotAfter.Format(time.TimeOnly), s.at.Format(time.TimeOnly))
	}
	return strings.TrimSpace(b.String())
}
