package artifactclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
)

// Client talks to one artifact API.
type Client struct {
	// BaseURL of the global controller's API, e.g. "https://edgefleet.example:8443".
	BaseURL string
	// HTTP sends the requests and adds the credentials (a bearer token).
	HTTP *http.Client
	// Retries is how often a broken transfer is resumed before giving up.
	Retries int
	// RetryDelay is the pause before the first resume; it doubles with each.
	RetryDelay time.Duration
	// OnRetry, when set, is told of each retry before its pause: what failed, why, and when
	// the next attempt comes. The CLI prints it on stderr.
	OnRetry func(Retry)
}

// Retry tells what a transfer retries, why, and when.
type Retry struct {
	// What is retried, e.g. "download of sha256:… to FILE".
	What string
	// Err is why the last attempt failed.
	Err error
	// Attempt is the number of the next attempt (2 for the first retry), of Of in all.
	Attempt, Of int
	// After is the pause before the next attempt.
	After time.Duration
}

func (r Retry) String() string {
	return fmt.Sprintf("retrying %s in %s (attempt %d of %d): %v", r.What, r.After, r.Attempt, r.Of, r.Err)
}

// LocalError is a failure of the local file a transfer reads or writes: a missing directory,
// no permission, a full disk. Retrying would not mend it, so transfers fail at once with it.
type LocalError struct {
	// Path is the local file.
	Path string
	// Err is the failure, naming the path (an *fs.PathError mostly).
	Err error
}

func (e *LocalError) Error() string { return e.Err.Error() }

func (e *LocalError) Unwrap() error { return e.Err }

// retry runs attempt until it succeeds, fails with an error retryable does not accept, or
// has been retried Retries times; it pauses RetryDelay before the first retry, doubling with
// each, and tells OnRetry before every pause.
func (c *Client) retry(ctx context.Context, what string, retryable func(error) bool, attempt func(n int) error) error {
	delay := c.RetryDelay
	for n := 1; ; n++ {
		err := attempt(n)
		if err == nil {
			return nil
		}
		var local *LocalError
		if errors.As(err, &local) || !retryable(err) || n > c.Retries || ctx.Err() != nil {
			return err
		}
		if c.OnRetry != nil {
			c.OnRetry(Retry{What: what, Err: err, Attempt: n + 1, Of: c.Retries + 1, After: delay})
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (while waiting to retry after: %w)", ctx.Err(), err)
		case <-time.After(delay):
		}
		delay *= 2
	}
}

// APIError is an error answer of the API.
type APIError struct {
	Status int
	Body   restv1.Error
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), e.Body.Message)
	if e.Status == http.StatusUnauthorized {
		msg += " (the artifact API takes a bearer token: use a kubeconfig user with a token)"
	}
	return msg
}

// Progress is told how many bytes of a transfer are done (the total is known up front).
type Progress func(done int64)

// do sends a request and decodes a JSON answer with one of the wanted statuses into out; it
// returns the answer's headers.
func (c *Client) do(ctx context.Context, method, path string, body io.Reader, header http.Header, out any, want ...int) (http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.BaseURL, "/")+path, body)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	for _, w := range want {
		if resp.StatusCode == w {
			if out != nil {
				if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
					return resp.Header, fmt.Errorf("%s %s: answer is not the expected JSON: %w", method, path, err)
				}
			}
			return resp.Header, nil
		}
	}
	e := &APIError{Status: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &e.Body) != nil || e.Body.Message == "" {
		e.Body.Message = strings.TrimSpace(string(b))
	}
	return resp.Header, e
}

// List returns one page of artifacts.
func (c *Client) List(ctx context.Context, kind restv1.ArtifactKind, name, labelSelector string, limit int, cont string) (restv1.ArtifactList, error) {
	q := url.Values{}
	for k, v := range map[string]string{"kind": string(kind), "name": name, "labelSelector": labelSelector, "continue": cont} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var list restv1.ArtifactList
	_, err := c.do(ctx, http.MethodGet, "/api/v1/artifacts?"+q.Encode(), nil, nil, &list, http.StatusOK)
	return list, err
}

// Get returns an artifact's metadata.
func (c *Client) Get(ctx context.Context, id string) (restv1.Artifact, error) {
	var a restv1.Artifact
	_, err := c.do(ctx, http.MethodGet, "/api/v1/artifacts/"+url.PathEscape(id), nil, nil, &a, http.StatusOK)
	return a, err
}

// Delete deletes an artifact.
func (c *Client) Delete(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, "/api/v1/artifacts/"+url.PathEscape(id), nil, nil, nil, http.StatusNoContent)
	return err
}

// Upload uploads a file as an artifact through a resumable session: it opens the session with
// the file's size (a server without room for it refuses at once), hashes the file, sends the
// content and, when the connection breaks, asks the server for its offset and continues from
// there, up to Retries times, and finishes with the sha256.
func (c *Client) Upload(ctx context.Context, spec restv1.ArtifactSpec, path string, progress Progress) (restv1.Artifact, error) {
	f, err := os.Open(path)
	if err != nil {
		return restv1.Artifact{}, &LocalError{Path: path, Err: err}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return restv1.Artifact{}, &LocalError{Path: path, Err: err}
	}
	size := st.Size()
	body, _ := json.Marshal(restv1.CreateUpload{ArtifactSpec: spec, Size: &size})
	var up restv1.Upload
	if _, err := c.do(ctx, http.MethodPost, "/api/v1/uploads", bytes.NewReader(body), jsonHeader(), &up, http.StatusCreated); err != nil {
		return restv1.Artifact{}, fmt.Errorf("start upload of %s: %w", path, err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		err = &LocalError{Path: path, Err: fmt.Errorf("hash %s: %w", path, err)}
		if _, abortErr := c.do(context.WithoutCancel(ctx), http.MethodDelete, "/api/v1/uploads/"+up.ID, nil, nil, nil, http.StatusNoContent); abortErr != nil {
			err = errors.Join(err, fmt.Errorf("abort upload session %s: %w", up.ID, abortErr))
		}
		return restv1.Artifact{}, err
	}
	digest := hex.EncodeToString(h.Sum(nil))
	// A broken connection is retried, and so is 409 (the server still saves the broken
	// request); other answers of the server are final.
	retryable := func(err error) bool {
		var apiErr *APIError
		return !errors.As(err, &apiErr) || apiErr.Status == http.StatusConflict
	}
	offset := int64(0)
	err = c.retry(ctx, fmt.Sprintf("upload of %s (session %s)", path, up.ID), retryable, func(n int) error {
		if n > 1 {
			var err error
			if offset, err = c.offset(ctx, up.ID); err != nil {
				return fmt.Errorf("ask the server where to resume: %w", err)
			}
		}
		if offset >= size {
			return nil
		}
		return c.sendFrom(ctx, up.ID, f, path, offset, size, progress)
	})
	if err != nil {
		return restv1.Artifact{}, fmt.Errorf("upload %s (session %s, at %d of %d bytes): %w", path, up.ID, offset, size, err)
	}
	finish, _ := json.Marshal(restv1.FinishUpload{SHA256: digest})
	var a restv1.Artifact
	if _, err := c.do(ctx, http.MethodPost, "/api/v1/uploads/"+up.ID+"/finish", bytes.NewReader(finish), jsonHeader(), &a, http.StatusCreated); err != nil {
		return restv1.Artifact{}, fmt.Errorf("finish upload of %s: %w", path, err)
	}
	return a, nil
}

func (c *Client) sendFrom(ctx context.Context, id string, f *os.File, path string, offset, size int64, progress Progress) error {
	file := &fileReader{r: io.NewSectionReader(f, offset, size-offset), path: path}
	r := &countingReader{r: file, done: offset, progress: progress}
	h := http.Header{restv1.HeaderUploadOffset: {strconv.FormatInt(offset, 10)}, "Content-Type": {"application/octet-stream"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, strings.TrimSuffix(c.BaseURL, "/")+"/api/v1/uploads/"+id, r)
	if err != nil {
		return err
	}
	req.Header = h
	req.ContentLength = size - offset
	resp, err := c.HTTP.Do(req)
	if file.err != nil {
		// Reading the file failed, not the connection: the transport's error may not say so.
		return file.err
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		return nil
	}
	e := &APIError{Status: resp.StatusCode}
	_ = json.NewDecoder(resp.Body).Decode(&e.Body)
	return e
}

func (c *Client) offset(ctx context.Context, id string) (int64, error) {
	h, err := c.do(ctx, http.MethodHead, "/api/v1/uploads/"+id, nil, nil, nil, http.StatusOK)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(h.Get(restv1.HeaderUploadOffset), 10, 64)
}

// Download writes the content with this sha256 to path. It writes to path+".part" first and,
// when that file exists from a broken earlier download, continues it with a Range request; a
// broken connection is resumed the same way up to Retries times. The file is renamed to path
// only when its sha256 matches.
func (c *Client) Download(ctx context.Context, digest, path string, progress Progress) error {
	part := path + ".part"
	if dir := filepath.Dir(path); dir != "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return fmt.Errorf("download sha256:%s to %s: %w", digest, path,
				&LocalError{Path: path, Err: fmt.Errorf("directory %s does not exist", dir)})
		}
	}
	// A broken connection is retried; an answer of the server is final.
	retryable := func(err error) bool {
		var apiErr *APIError
		return !errors.As(err, &apiErr)
	}
	what := fmt.Sprintf("download of sha256:%s to %s", digest, path)
	if err := c.retry(ctx, what, retryable, func(int) error { return c.downloadPart(ctx, digest, part, progress) }); err != nil {
		return fmt.Errorf("download sha256:%s to %s: %w", digest, path, err)
	}
	if err := verify(part, digest); err != nil {
		_ = os.Remove(part)
		return err
	}
	if err := os.Rename(part, path); err != nil {
		return &LocalError{Path: path, Err: err}
	}
	return nil
}

func (c *Client) downloadPart(ctx context.Context, digest, part string, progress Progress) error {
	f, err := os.OpenFile(part, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return &LocalError{Path: part, Err: err}
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return &LocalError{Path: part, Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.BaseURL, "/")+"/api/v1/blobs/sha256:"+digest, nil)
	if err != nil {
		return err
	}
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
		req.Header.Set("If-Range", `"sha256:`+digest+`"`)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK:
		if have > 0 { // the whole content, not the rest: start over
			if err := f.Truncate(0); err != nil {
				return &LocalError{Path: part, Err: err}
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return &LocalError{Path: part, Err: err}
			}
			have = 0
		}
	case http.StatusRequestedRangeNotSatisfiable:
		return nil // the part file is complete
	default:
		e := &APIError{Status: resp.StatusCode}
		_ = json.NewDecoder(resp.Body).Decode(&e.Body)
		return e
	}
	_, err = io.Copy(fileWriter{f: f, path: part}, &countingReader{r: resp.Body, done: have, progress: progress})
	return err
}

// fileWriter writes to a local file and tells its errors (disk full, …) as *LocalError, apart
// from the connection's.
type fileWriter struct {
	f    *os.File
	path string
}

func (w fileWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if err != nil {
		err = &LocalError{Path: w.path, Err: err}
	}
	return n, err
}

// fileReader reads a local file and keeps its first error other than io.EOF: the HTTP
// transport reading it may report that error as a broken connection.
type fileReader struct {
	r    io.Reader
	path string
	err  error
}

func (r *fileReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		if r.err == nil {
			r.err = &LocalError{Path: r.path, Err: fmt.Errorf("read %s: %w", r.path, err)}
		}
		return n, r.err
	}
	return n, err
}

func verify(path, digest string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != digest {
		return fmt.Errorf("downloaded content has sha256 %s, want %s; discarded it, download again to start over", got, digest)
	}
	return nil
}

type countingReader struct {
	r        io.Reader
	done     int64
	progress Progress
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.done += int64(n)
	if c.progress != nil && n > 0 {
		c.progress(c.done)
	}
	return n, err
}

func jsonHeader() http.Header { return http.Header{"Content-Type": {"application/json"}} }

// ClusterCredential asks the global controller for a cluster user's credential for the
// application cluster of Site site in namespace ns (POST
// /api/v1/namespaces/{ns}/sites/{site}/kubeconfig). Bound it with ctx's deadline: the global
// controller waits up to 30 s for the site's answer.
func (c *Client) ClusterCredential(ctx context.Context, ns, site string, req restv1.KubeconfigRequest) (restv1.ClusterCredential, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return restv1.ClusterCredential{}, err
	}
	var cred restv1.ClusterCredential
	path := "/api/v1/namespaces/" + url.PathEscape(ns) + "/sites/" + url.PathEscape(site) + "/kubeconfig"
	if _, err := c.do(ctx, http.MethodPost, path, bytes.NewReader(body), jsonHeader(), &cred, http.StatusOK); err != nil {
		return restv1.ClusterCredential{}, fmt.Errorf("kubeconfig of site %s/%s: %w", ns, site, err)
	}
	return cred, nil
}

// SiteLog reads the recent log lines of a site component (GET .../sites/{site}/log); q holds
// the endpoint's query parameters (component, tailLines, sinceSeconds or sinceTime).
func (c *Client) SiteLog(ctx context.Context, ns, site string, q url.Values) (restv1.SiteLog, error) {
	var log restv1.SiteLog
	path := "/api/v1/namespaces/" + url.PathEscape(ns) + "/sites/" + url.PathEscape(site) + "/log?" + q.Encode()
	if _, err := c.do(ctx, http.MethodGet, path, nil, nil, &log, http.StatusOK); err != nil {
		return restv1.SiteLog{}, fmt.Errorf("logs of site %s/%s: %w", ns, site, err)
	}
	return log, nil
}
