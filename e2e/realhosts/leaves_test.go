package realhosts_test

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"
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

// rolledOver checks what was seen in f through a CA roll-over from the oldCA's leaves to the
// new CA's: the first leaf seen is of the old CA (the watch began before the roll-over), the
// last of the new CA; the new CA issued at least two (one renewed while the roll-over went on),
// leaves of minutes (the spec's validity, not the defaults' year); and every leaf was replaced
// before it expired.
func (l *leafLog) rolledOver(f hostFile, oldCA string) error {
	all, ofNew := l.of(f), l.ofNew(f)
	var errs []error
	switch {
	case len(all) == 0:
		return fmt.Errorf("%s of %s: no certificate seen", f.file, f.h.Name)
	case all[0].cert.Issuer.CommonName != oldCA:
		errs = append(errs, fmt.Errorf("the first leaf seen is of %q, not the old CA %q", all[0].cert.Issuer.CommonName, oldCA))
	}
	if last := all[len(all)-1]; last.cert.Issuer.CommonName != l.newCA {
		errs = append(errs, fmt.Errorf("the leaf on the host now is of %q, not the new CA %q", last.cert.Issuer.CommonName, l.newCA))
	}
	if len(ofNew) < 2 {
		errs = append(errs, fmt.Errorf("the new CA's leaf was never renewed (%d seen)", len(ofNew)))
	}
	if len(ofNew) > 0 && ofNew[0].cert.NotAfter.Sub(ofNew[0].cert.NotBefore) >= time.Hour {
		errs = append(errs, fmt.Errorf("the new CA's first leaf is valid for %s, not minutes", ofNew[0].cert.NotAfter.Sub(ofNew[0].cert.NotBefore)))
	}
	for i := 1; i < len(all); i++ {
		if !all[i].at.Before(all[i-1].cert.NotAfter) {
			errs = append(errs, fmt.Errorf("leaf %d replaced at %s, after it expired at %s", i-1, all[i].at.Format(time.TimeOnly), all[i-1].cert.NotAfter.Format(time.TimeOnly)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s of %s: %w; seen %s", f.file, f.h.Name, err, l.String(f))
	}
	return nil
}

// TestLeafLogRolledOver checks rolledOver on made-up logs (no test host): a roll-over as it
// should go passes; each way one can go wrong fails, naming it.
func TestLeafLogRolledOver(t *testing.T) {
	f := hostFile{h: &testhosts.Host{Name: "host-3"}, file: "/etc/kubernetes/pki/node-client.crt"}
	t0 := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	serial := int64(0)
	leaf := func(issuer string, notBefore time.Time, validity time.Duration, seen time.Time) seenLeaf {
		serial++
		return seenLeaf{at: seen, cert: &x509.Certificate{SerialNumber: big.NewInt(serial), Issuer: pkix.Name{CommonName: issuer},
			NotBefore: notBefore, NotAfter: notBefore.Add(validity)}}
	}
	year, minutes := 365*24*time.Hour, 10*time.Minute
	good := []seenLeaf{
		leaf("kubernetes", t0.Add(-time.Hour), year, t0),
		leaf("kubernetes", t0.Add(time.Minute), minutes, t0.Add(time.Minute)),
		leaf("kubernetes-2", t0.Add(5*time.Minute), minutes, t0.Add(5*time.Minute)),
		leaf("kubernetes-2", t0.Add(7*time.Minute), minutes, t0.Add(7*time.Minute)),
	}
	for name, tc := range map[string]struct {
		seen []seenLeaf
		want string // in the error; none when empty
	}{
		"as it should go":             {seen: good},
		"nothing seen":                {want: "no certificate seen"},
		"the watch began too late":    {seen: good[2:], want: `the first leaf seen is of "kubernetes-2"`},
		"still the old CA's":          {seen: good[:2], want: `the leaf on the host now is of "kubernetes"`},
		"the new CA's never renewed":  {seen: good[:3], want: "never renewed (1 seen)"},
		"a new leaf of a year":        {seen: append(good[:2:2], leaf("kubernetes-2", t0.Add(5*time.Minute), year, t0.Add(5*time.Minute)), good[3]), want: "valid for 8760h0m0s"},
		"replaced after it expired":   {seen: append(good[:3:3], leaf("kubernetes-2", t0.Add(16*time.Minute), minutes, t0.Add(16*time.Minute))), want: "leaf 2 replaced at 01:16:00, after it expired at 01:15:00"},
		"replaced as it expired, too": {seen: append(good[:3:3], leaf("kubernetes-2", t0.Add(15*time.Minute), minutes, t0.Add(15*time.Minute))), want: "after it expired"},
	} {
		t.Run(name, func(t *testing.T) {
			l := &leafLog{newCA: "kubernetes-2", seen: map[hostFile][]seenLeaf{f: tc.seen}}
			err := l.rolledOver(f, "kubernetes")
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("rolledOver = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("rolledOver = %v, want an error with %q", err, tc.want)
			}
		})
	}
}
