package artifactapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/pkg/artifacts"
)

// serveBlob streams content with http.ServeContent: Range (206, multipart), If-None-Match and
// If-Range against the ETag (the sha256), HEAD. Memory stays flat: chunks are read as sent.
func (s *Server) serveBlob(c *gin.Context, digest, name string) {
	blob, err := s.Store.OpenBlob(c.Request.Context(), digest)
	if err != nil {
		s.fail(c, err)
		return
	}
	etag := `"sha256:` + digest + `"`
	c.Header("ETag", etag)
	// The content's headers come after the Range check, whose refusal is JSON.
	if !s.canonicalRange(c, etag, blob.Size) {
		return
	}
	c.Header("Content-Type", "application/octet-stream")
	c.Header("Digest", "sha-256="+digest)
	if name != "" {
		c.Header("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	}
	r := &blobReader{ctx: c.Request.Context(), blob: blob, budget: s.Store.Budget()}
	defer r.Close()
	http.ServeContent(c.Writer, c.Request, "", time.Time{}, r)
}

// canonicalRange replaces the request's Range header by its satisfiable ranges (see
// checkRange), or answers 416 with Content-Range: bytes */size and says what is wrong when it
// has none and ServeContent would evaluate it. When a condition may make ServeContent skip the
// Range (If-Range, If-Match, If-None-Match in forms rangeApplies does not tell), the header
// becomes a range that starts at the end, which ServeContent answers the same way if it gets
// to it. It returns false when it answered.
func (s *Server) canonicalRange(c *gin.Context, etag string, size int64) bool {
	ranges, err := checkRange(c.Request.Header.Get("Range"), size)
	switch {
	case err == nil && ranges == "":
		c.Request.Header.Del("Range")
	case err == nil:
		c.Request.Header.Set("Range", ranges)
	case err != nil && rangeApplies(c.Request, etag):
		c.Header("Content-Range", fmt.Sprintf("bytes */%d", size))
		writeError(c, http.StatusRequestedRangeNotSatisfiable, restv1.Error{Message: err.Error(), Field: "Range"})
		return false
	case err != nil:
		c.Request.Header.Set("Range", fmt.Sprintf("bytes=%d-", size))
	}
	return true
}

// blobReader is an io.ReadSeeker over a blob: each Read continues a stream of chunks from the
// current position, restarted after a Seek. Each stream first waits for its lease of the
// transfer memory budget.
type blobReader struct {
	ctx    context.Context
	blob   *artifacts.Blob
	budget *artifacts.Budget
	pos    int64
	stream *queue
}

// queue passes the chunks WriteRange writes to Read through a bounded buffer, so that the next
// chunks are read from the database while the previous ones are sent: it holds two of the
// lease's read batches, so that a whole batch is handed over at once and the next one is asked
// for while the last is still being sent (with less than a batch, the database waits for the
// client, then the client for the database). The chunk buffers Read is done with go back to
// Write: a download makes no garbage of its own (the GC's work, which a streaming download's
// small heap makes frequent, slows the database's decoding down).
type queue struct {
	ch   chan []byte
	free chan []byte
	stop chan struct{}
	err  error // set before ch is closed
	cur  []byte
	buf  []byte // the buffer cur is in
}

// newQueue returns a queue of chunks chunks.
func newQueue(chunks int) *queue {
	return &queue{ch: make(chan []byte, chunks), free: make(chan []byte, chunks+1), stop: make(chan struct{})}
}

func (q *queue) Write(p []byte) (int, error) {
	var b []byte
	select {
	case b = <-q.free:
	default:
	}
	select {
	case q.ch <- append(b[:0], p...):
		return len(p), nil
	case <-q.stop:
		return 0, io.ErrClosedPipe
	}
}

func (q *queue) Read(p []byte) (int, error) {
	for len(q.cur) == 0 {
		if q.buf != nil {
			select {
			case q.free <- q.buf:
			default:
			}
			q.buf = nil
		}
		b, ok := <-q.ch
		if !ok {
			if q.err != nil {
				return 0, q.err
			}
			return 0, io.EOF
		}
		q.cur, q.buf = b, b
	}
	n := copy(p, q.cur)
	q.cur = q.cur[n:]
	return n, nil
}

func (r *blobReader) Read(p []byte) (int, error) {
	if r.pos >= r.blob.Size {
		return 0, io.EOF
	}
	if r.stream == nil {
		lease, err := r.budget.LeaseDownload(r.ctx, "download of blob sha256:"+r.blob.SHA256)
		if err != nil {
			return 0, err
		}
		q := newQueue(2 * lease.Batch)
		start := r.pos
		go func() {
			defer lease.Release()
			q.err = r.blob.WriteRange(r.ctx, q, start, r.blob.Size-start, lease.Batch)
			close(q.ch)
		}()
		r.stream = q
	}
	n, err := r.stream.Read(p)
	r.pos += int64(n)
	if errors.Is(err, io.EOF) && r.pos < r.blob.Size {
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

func (r *blobReader) Seek(offset int64, whence int) (int64, error) {
	var pos int64
	switch whence {
	case io.SeekStart:
		pos = offset
	case io.SeekCurrent:
		pos = r.pos + offset
	case io.SeekEnd:
		pos = r.blob.Size + offset
	default:
		return r.pos, fmt.Errorf("seek: bad whence %d", whence)
	}
	if pos < 0 {
		return r.pos, fmt.Errorf("seek to negative position %d", pos)
	}
	if pos != r.pos {
		r.Close()
		r.pos = pos
	}
	return pos, nil
}

// Close stops the chunk stream, if one runs.
func (r *blobReader) Close() {
	if r.stream != nil {
		close(r.stream.stop)
		r.stream = nil
	}
}
