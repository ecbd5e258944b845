package artifactapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgefleet/edgefleet/pkg/artifacts"
)

// DefaultBodyReadTimeout is how long an upload body may send nothing before it is cut, when
// Server.BodyReadTimeout is zero.
const DefaultBodyReadTimeout = time.Minute

// idleBody is an upload's request body whose every Read must return within timeout: a client
// that stalls is cut after timeout without a byte, however long the whole upload takes (a
// deadline on the whole request would cut big uploads).
type idleBody struct {
	body    io.Reader
	rc      *http.ResponseController
	timeout time.Duration
}

func (s *Server) idleBody(c *gin.Context) *idleBody {
	timeout := s.BodyReadTimeout
	if timeout == 0 {
		timeout = DefaultBodyReadTimeout
	}
	return &idleBody{body: c.Request.Body, rc: http.NewResponseController(c.Writer), timeout: timeout}
}

func (b *idleBody) Read(p []byte) (int, error) {
	// Without support (a ResponseWriter that cannot reach its connection), reads are not timed.
	_ = b.rc.SetReadDeadline(time.Now().Add(b.timeout))
	return b.body.Read(p)
}

// done lifts the read deadline: the connection may carry further requests.
func (b *idleBody) done() { _ = b.rc.SetReadDeadline(time.Time{}) }

// problem says what went wrong with an upload body that broke off: 408 when it sent no
// byte within the read timeout, 400 when it ended before its Content-Length or the connection
// broke.
func (b *idleBody) problem(c *gin.Context, re *artifacts.ReadError) (int, string) {
	got := fmt.Sprintf("%d bytes", re.Read)
	if n := c.Request.ContentLength; n >= 0 {
		got = fmt.Sprintf("%d of %d bytes", re.Read, n)
	}
	switch {
	case errors.Is(re.Err, os.ErrDeadlineExceeded):
		return http.StatusRequestTimeout, fmt.Sprintf("request body sent nothing for %s after %s", b.timeout, got)
	case errors.Is(re.Err, io.ErrUnexpectedEOF):
		return http.StatusBadRequest, fmt.Sprintf("request body ended after %s", got)
	default:
		return http.StatusBadRequest, fmt.Sprintf("request body broke off after %s: %v", got, re.Err)
	}
}
