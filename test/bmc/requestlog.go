package bmc

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Request is one request the server answered.
type Request struct {
	Time   time.Time
	Method string
	Path   string
	Status int
	// User is the user the request authenticated as; empty when it did not (or needed not).
	User string
	// Agent is the client's User-Agent (sushy's is python-requests/...; Go's Go-http-client/...).
	Agent string
}

func (r Request) String() string {
	return fmt.Sprintf("%s %s %s -> %d (%s)", r.Time.Format("15:04:05.000"), r.Method, r.Path, r.Status, r.Agent)
}

// requestLog keeps the latest requests, up to its size: the story of a failed test.
type requestLog struct {
	mu      sync.Mutex
	size    int
	entries []Request
	dropped int
}

func (l *requestLog) add(r Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.entries) == l.size {
		copy(l.entries, l.entries[1:])
		l.entries = l.entries[:len(l.entries)-1]
		l.dropped++
	}
	l.entries = append(l.entries, r)
}

func (l *requestLog) list() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Request(nil), l.entries...)
}

func (l *requestLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	if l.dropped > 0 {
		fmt.Fprintf(&b, "(%d earlier requests dropped)\n", l.dropped)
	}
	for _, r := range l.entries {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}
