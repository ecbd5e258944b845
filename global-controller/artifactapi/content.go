package artifactapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

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
	r := &blobReader{ctx: c.Request.Context(), blob: blob}
	defer r.Close()
	c.Header("ETag", `"sha256:`+digest+`"`)
	c.Header("Content-Type", "application/octet-stream")
	c.Header("Digest", "sha-256="+digest)
	if name != "" {
		c.Header("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	}
	http.ServeContent(c.Writer, c.Request, "", time.Time{}, r)
}

// blobReader is an io.ReadSeeker over a blob: each Read continues a stream of chunks from the
// current position, restarted after a Seek.
type blobReader struct {
	ctx    context.Context
	blob   *artifacts.Blob
	pos    int64
	stream *io.PipeReader
}

func (r *blobReader) Read(p []byte) (int, error) {
	if r.pos >= r.blob.Size {
		return 0, io.EOF
	}
	if r.stream == nil {
		pr, pw := io.Pipe()
		start := r.pos
		go func() {
			pw.CloseWithError(r.blob.WriteRange(r.ctx, pw, start, r.blob.Size-start))
		}()
		r.stream = pr
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
		_ = r.stream.Close()
		r.stream = nil
	}
}
