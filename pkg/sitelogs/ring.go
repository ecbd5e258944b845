// Package sitelogs keeps a site component's recent log lines in memory and answers the global
// controller's LogRequests from them: the log viewer's site side. A component tees its logger
// into a Ring (Tee) and runs a Responder; nothing is written to disk.
package sitelogs

import (
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Ring holds the newest log lines of one process, bounded in lines and bytes: the oldest go
// first. It is safe for concurrent use.
type Ring struct {
	mu       sync.Mutex
	maxLines int
	maxBytes int
	lines    []line // oldest first
	bytes    int
	// dropped is whether a line was ever left out: the ring no longer holds everything
	// logged since the process started.
	dropped bool
}

type line struct {
	at   time.Time
	text string
}

// NewRing returns a ring of at most maxLines lines and maxBytes bytes; a single line longer
// than maxBytes is cut to it.
func NewRing(maxLines, maxBytes int) *Ring {
	return &Ring{maxLines: max(maxLines, 1), maxBytes: max(maxBytes, 1)}
}

// add keeps text, logged at at, as the newest line.
func (r *Ring) add(at time.Time, text string) {
	text = strings.TrimRight(text, "\n")
	if len(text) > r.maxBytes {
		text = text[:r.maxBytes]
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line{at: at, text: text})
	r.bytes += len(text)
	drop := 0
	for len(r.lines)-drop > r.maxLines || r.bytes > r.maxBytes {
		r.bytes -= len(r.lines[drop].text)
		drop++
	}
	if drop > 0 {
		r.dropped = true
		// Copy rather than reslice, so the backing array does not keep growing.
		r.lines = append(r.lines[:0:0], r.lines[drop:]...)
	}
}

// Tail is what the ring holds of the newest n lines logged after since (zero: any time), within
// maxBytes, oldest first. truncated says that older lines that would match were left out:
// dropped by the ring's bounds, beyond n, or beyond maxBytes. oldest is the time of the oldest
// line the ring still holds (zero when empty).
func (r *Ring) Tail(n int, since time.Time, maxBytes int) (lines []string, truncated bool, oldest time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lines) > 0 {
		oldest = r.lines[0].at
	}
	// The ring lost lines that would match when it dropped any logged after since.
	truncated = r.dropped && (since.IsZero() || oldest.After(since))
	first := len(r.lines)
	size := 0
	for i := len(r.lines) - 1; i >= 0; i-- {
		l := r.lines[i]
		if !since.IsZero() && !l.at.After(since) {
			break
		}
		if len(r.lines)-i > n || size+len(l.text) > maxBytes {
			truncated = true
			break
		}
		size += len(l.text)
		first = i
	}
	for _, l := range r.lines[first:] {
		lines = append(lines, l.text)
	}
	return lines, truncated, oldest
}

// Tee is the zap option that tees a logger into the ring (controller-runtime's zap.RawZapOpts):
// entries at level Info and above, each a JSON object ("ts" in RFC 3339 with nanoseconds,
// "level", "logger", "msg", then the entry's fields).
func (r *Ring) Tee() zap.Option {
	return zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, r.core()) })
}

func (r *Ring) core() zapcore.Core {
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{
		TimeKey:        "ts",
		LevelKey:       "level",
		NameKey:        "logger",
		MessageKey:     "msg",
		StacktraceKey:  "stacktrace",
		LineEnding:     "\n",
		EncodeTime:     zapcore.RFC3339NanoTimeEncoder,
		EncodeLevel:    zapcore.LowercaseLevelEncoder,
		EncodeDuration: zapcore.StringDurationEncoder,
		EncodeName:     zapcore.FullNameEncoder,
	})
	return &ringCore{LevelEnabler: zapcore.InfoLevel, enc: enc, ring: r}
}

// ringCore is a zap core writing into a Ring with each entry's own time, so that a follower
// asking for lines after the newest it has (its "ts") gets each line once.
type ringCore struct {
	zapcore.LevelEnabler
	enc  zapcore.Encoder
	ring *Ring
}

func (c *ringCore) With(fields []zapcore.Field) zapcore.Core {
	enc := c.enc.Clone()
	for _, f := range fields {
		f.AddTo(enc)
	}
	return &ringCore{LevelEnabler: c.LevelEnabler, enc: enc, ring: c.ring}
}

func (c *ringCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}

func (c *ringCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	buf, err := c.enc.EncodeEntry(ent, fields)
	if err != nil {
		return err
	}
	c.ring.add(ent.Time, buf.String())
	buf.Free()
	return nil
}

func (c *ringCore) Sync() error { return nil }
