package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/pkg/artifactclient"
	"github.com/edgefleet/edgefleet/test/testfleet"
)

// restStore goes through the global controller's artifact REST API, as the CLI does: the same
// HTTP client (client-go transport with the operator's bearer token) and the same resumable
// upload protocol. artifactclient.Upload and Download take file paths; the content here is
// streamed instead, so that neither path pays for a disk file the other does not.
type restStore struct {
	base   string
	http   *http.Client
	client *artifactclient.Client
}

func newRESTStore(ctx context.Context, f *testfleet.Fleet) (*restStore, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", f.OperatorKubeconfig())
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", f.OperatorKubeconfig(), err)
	}
	api := rest.AnonymousClientConfig(cfg)
	api.BearerToken = cfg.BearerToken
	api.Host = f.APIURL
	hc, err := rest.HTTPClientFor(api)
	if err != nil {
		return nil, fmt.Errorf("HTTP client for %s: %w", f.APIURL, err)
	}
	hc.Timeout = 0
	s := &restStore{base: f.APIURL, http: hc, client: &artifactclient.Client{BaseURL: f.APIURL, HTTP: hc, RetryDelay: time.Second}}
	return s, s.waitReady(ctx)
}

// waitReady waits until the API answers: the controller reports ready (/readyz) before the
// manager has started the API server's listener.
func (s *restStore) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/api/v1/openapi.yaml", nil)
		if err != nil {
			return err
		}
		resp, err := s.http.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("artifact API at %s not answering after 30s: %w", s.base, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// upload opens an upload session stating sha256 and size, sends the content in one PATCH and
// finishes the session (the server checks the sha256). It returns the artifact's id.
func (s *restStore) upload(ctx context.Context, name string, r io.Reader, size int64, digest string) (string, error) {
	body, err := json.Marshal(restv1.CreateUpload{
		ArtifactSpec: restv1.ArtifactSpec{Kind: restv1.KindOSImage, Name: "bench", Version: name, Architecture: "amd64"},
		SHA256:       digest, Size: &size,
	})
	if err != nil {
		return "", err
	}
	var up restv1.Upload
	if err := s.call(ctx, http.MethodPost, "/api/v1/uploads", bytes.NewReader(body), -1, nil, &up, http.StatusCreated); err != nil {
		return "", err
	}
	h := http.Header{restv1.HeaderUploadOffset: {"0"}, "Content-Type": {"application/octet-stream"}}
	if err := s.call(ctx, http.MethodPatch, "/api/v1/uploads/"+up.ID, r, size, h, nil, http.StatusNoContent); err != nil {
		return "", errors.Join(err, s.abort(context.WithoutCancel(ctx), up.ID))
	}
	var a restv1.Artifact
	if err := s.call(ctx, http.MethodPost, "/api/v1/uploads/"+up.ID+"/finish", bytes.NewReader([]byte(`{}`)), -1, nil, &a, http.StatusCreated); err != nil {
		return "", err
	}
	if a.SHA256 != digest || a.Size != size {
		return "", fmt.Errorf("stored artifact %s has %d bytes with sha256 %s, want %d bytes with %s", a.ID, a.Size, a.SHA256, size, digest)
	}
	return a.ID + "/" + a.SHA256, nil
}

// abort deletes a broken upload session, so that its chunks do not weigh on later transfers.
// The server keeps the session locked while it saves what arrived: abort retries for a minute.
func (s *restStore) abort(ctx context.Context, id string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := s.call(ctx, http.MethodDelete, "/api/v1/uploads/"+id, nil, -1, nil, nil, http.StatusNoContent)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Second)
	}
}

// download reads the content by its digest, as a site cache does.
func (s *restStore) download(ctx context.Context, ref string, w io.Writer) error {
	_, digest := splitRef(ref)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/api/v1/blobs/sha256:"+digest, nil)
	if err != nil {
		return err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return apiError(resp)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

func (s *restStore) remove(ctx context.Context, ref string) error {
	id, _ := splitRef(ref)
	return s.client.Delete(ctx, id)
}

// call sends a request and decodes a JSON answer of the wanted status into out.
func (s *restStore) call(ctx context.Context, method, path string, body io.Reader, size int64, h http.Header, out any, want int) error {
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, body)
	if err != nil {
		return err
	}
	if h != nil {
		req.Header = h
	} else {
		req.Header.Set("Content-Type", "application/json")
	}
	if size >= 0 {
		req.ContentLength = size
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %w", method, path, apiError(resp))
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return fmt.Errorf("%s %s: answer is not the expected JSON: %w", method, path, err)
		}
	}
	return nil
}

func apiError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
}

// splitRef splits a reference "ID/SHA256".
func splitRef(ref string) (id, digest string) {
	id, digest, _ = strings.Cut(ref, "/")
	return id, digest
}
