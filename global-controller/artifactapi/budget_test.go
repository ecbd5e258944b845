package artifactapi_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/global-controller/artifactapi"
	"github.com/edgefleet/edgefleet/pkg/artifacts"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// slowReader reads a download a little at a time, pausing between reads, like a client on a
// slow link: the server's buffers fill up.
type slowReader struct{ r io.Reader }

func (s slowReader) Read(p []byte) (int, error) {
	time.Sleep(time.Millisecond)
	return s.r.Read(p[:min(len(p), 16<<10)])
}

// TestConcurrentDownloadsStayInBudget runs many slow downloads of the same blob at once
// through an API whose store has a small transfer memory budget: the budget in use never
// exceeds its limit, transfers wait for it rather than fail, every download gets the right
// bytes, and the heap (the embedded FerretDB's included: it runs in this process) grows by a
// bound derived from the budget, not by each stream's batches (about 60 MiB a stream before
// the budget).
func TestConcurrentDownloadsStayInBudget(t *testing.T) {
	const (
		budget  = 16 << 20
		streams = 20
	)
	s, err := artifacts.Open(t.Context(), database, artifacts.Options{Budget: artifacts.NewBudget(budget)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&artifactapi.Server{Store: s, Auth: auth, Log: logr.Discard()}).Handler())
	defer srv.Close()
	data, digest := testutil.RandomContent(6<<20+999, 60)
	resp, body := do(t, adminToken, http.MethodPost, query(restv1.KindOSImage, "budget", "1"), bytes.NewReader(data), map[string]string{restv1.HeaderSHA256: digest})
	expect(t, resp, body, http.StatusCreated)

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseline := ms.HeapInuse
	var maxInUse, maxWaiting int64
	var maxHeap uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			maxInUse = max(maxInUse, s.Budget().InUse())
			maxWaiting = max(maxWaiting, s.Budget().Waiting())
			runtime.ReadMemStats(&ms)
			maxHeap = max(maxHeap, ms.HeapInuse)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	var wg sync.WaitGroup
	var ok atomic.Int32
	for range streams {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/api/v1/blobs/sha256:"+digest, nil)
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("Authorization", "Bearer "+viewerToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			h := sha256.New()
			n, err := io.Copy(h, slowReader{resp.Body})
			if err != nil || resp.StatusCode != http.StatusOK || n != int64(len(data)) || hex.EncodeToString(h.Sum(nil)) != digest {
				t.Errorf("download: %d, %d bytes, %v, sha256 %x", resp.StatusCode, n, err, h.Sum(nil))
				return
			}
			ok.Add(1)
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	growth := int64(maxHeap) - int64(baseline)
	t.Logf("%d downloads of %d MiB: budget in use at most %d of %d MiB, up to %d waiting; heap in use %d MiB at most, %d MiB before",
		ok.Load(), len(data)>>20, maxInUse>>20, budget>>20, maxWaiting, maxHeap>>20, baseline>>20)
	if maxInUse > budget {
		t.Errorf("budget in use reached %d bytes, over its limit of %d", maxInUse, budget)
	}
	if s.Budget().InUse() != 0 {
		t.Errorf("%d bytes of the budget still leased after every download ended", s.Budget().InUse())
	}
	// The budget weighs the buffers and the database's copies of them; the garbage collector
	// lets the heap grow to twice what is live before it collects, and the rest of the process
	// (connections, HTTP buffers, the database's own state) takes some more.
	if bound := int64(4*budget + 32<<20); growth > bound {
		t.Errorf("heap in use grew by %d MiB under %d concurrent downloads, over the %d MiB the budget of %d MiB allows", growth>>20, streams, bound>>20, budget>>20)
	}
}
