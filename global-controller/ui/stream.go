package ui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgefleet/edgefleet/pkg/kubeauth"
)

// Events of a live stream (server-sent events), which static/ui.js handles:
//
//   - update: the page's live part, as HTML, to put in place of the old one;
//   - denied: the user may no longer see the page (token rejected, access revoked, object
//     gone); the data is the reason. The stream ends and the browser does not reconnect.
const (
	eventUpdate = "update"
	eventDenied = "denied"
)

// stream sends p's live part now, and again after every change the page watches (at most
// once per UpdateInterval) and every p.refresh when set, until the client leaves, StreamLifetime passes or the user may no
// longer see the page. Every update authenticates the token and checks access again (both
// cached for a few seconds by the reviewer), so a revoked token or binding ends the stream.
func (s *Server) stream(c *gin.Context, p page, req *request, token string) {
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		c.Header("Retry-After", "10")
		s.fail(c, &httpError{status: http.StatusServiceUnavailable, msg: fmt.Sprintf("too many live pages are open (%d): try again later", cap(s.streams))})
		return
	}
	lim := s.cfg.Limits
	ctx, cancel := context.WithTimeout(c.Request.Context(), lim.StreamLifetime)
	defer cancel()
	sub := s.cfg.Changes.Subscribe(p.watch(req))
	defer sub.Close()

	w := c.Writer
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(b []byte) error {
		if err := rc.SetWriteDeadline(s.cfg.Clock.Now().Add(lim.WriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}
	// The browser reconnects this long after the stream ends.
	if write([]byte("retry: 2000\n\n")) != nil {
		return
	}

	var last []byte
	update := func() bool {
		data, denied, err := s.live(ctx, p, req, token)
		switch {
		case denied != "":
			_ = write(sse(eventDenied, []byte(denied)))
			return false
		case err != nil:
			if ctx.Err() == nil {
				s.cfg.Log.Error(err, "update a live page", "path", c.Request.URL.Path, "user", req.User.Name)
			}
			return ctx.Err() == nil // try again at the next change
		case bytes.Equal(data, last):
			return true
		}
		last = data
		return write(sse(eventUpdate, data)) == nil
	}
	if !update() {
		return
	}
	keepAlive := s.cfg.Clock.NewTicker(lim.KeepAlive)
	defer keepAlive.Stop()
	var refresh <-chan time.Time // nil: the page changes only with what it watches
	if p.refresh > 0 {
		t := s.cfg.Clock.NewTicker(p.refresh)
		defer t.Stop()
		refresh = t.C()
	}
	var (
		lastUpdate = s.cfg.Clock.Now()
		due        <-chan time.Time // set while an update waits for UpdateInterval
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-keepAlive.C():
			if write([]byte(": keep-alive\n\n")) != nil {
				return
			}
			continue
		case <-sub.C:
			if due != nil {
				continue
			}
			if wait := lim.UpdateInterval - s.cfg.Clock.Since(lastUpdate); wait > 0 {
				due = s.cfg.Clock.After(wait)
				continue
			}
		case <-due:
			due = nil
		case <-refresh:
			if due != nil {
				continue
			}
		}
		if !update() {
			return
		}
		lastUpdate = s.cfg.Clock.Now()
	}
}

// live renders p's live part for the stream; denied says why the user may no longer see it.
func (s *Server) live(ctx context.Context, p page, req *request, token string) (data []byte, denied string, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Limits.RequestTimeout)
	defer cancel()
	u, err := s.cfg.Auth.Authenticate(ctx, token)
	if errors.Is(err, kubeauth.ErrUnauthenticated) {
		return nil, "Your token was rejected (expired or revoked): sign in again.", nil
	}
	if err != nil {
		return nil, "", err
	}
	req.User = u
	v, err := p.load(s, ctx, req)
	var he *httpError
	if errors.As(err, &he) {
		return nil, he.msg, nil
	}
	if err != nil {
		return nil, "", err
	}
	data, err = s.render(p.template, true, s.view(p, req, "", v))
	return data, "", err
}

// sse encodes one server-sent event: every line of data on a data: line of its own.
func sse(event string, data []byte) []byte {
	var b bytes.Buffer
	b.WriteString("event: " + event + "\n")
	for line := range bytes.Lines(data) {
		b.WriteString("data: ")
		b.Write(bytes.TrimRight(line, "\r\n"))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return b.Bytes()
}
