package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// concurrentResult is one size moved by n transfers at once through the REST API: n uploads of
// the same content, then n downloads of it.
type concurrentResult struct {
	size     int64
	n        int
	up, down measurement
}

// runConcurrent uploads the content of seed n times at once (each its own artifact, the same
// blob in the end), then downloads it n times at once, measuring the controller's peak RSS and
// the throughput of all transfers together, and deletes the artifacts.
func runConcurrent(ctx context.Context, ctl *controller, rest *restStore, size int64, n int, seed uint64, timeout time.Duration) (res concurrentResult, err error) {
	res = concurrentResult{size: size, n: n}
	digest, err := contentDigest(seed, size)
	if err != nil {
		return res, err
	}
	refs := make([]string, n)
	defer func() {
		for _, ref := range refs {
			if ref != "" {
				if rmErr := rest.remove(context.WithoutCancel(ctx), ref); rmErr != nil {
					err = errors.Join(err, fmt.Errorf("delete REST content %s: %w", ref, rmErr))
				}
			}
		}
	}()
	label := fmt.Sprintf("REST upload %s ×%d", formatSize(size), n)
	if res.up, err = ctl.measure(ctx, label, int64(n)*size, timeout, func(ctx context.Context, moved *atomic.Int64) error {
		return all(n, func(i int) error {
			var err error
			refs[i], err = rest.upload(ctx, fmt.Sprintf("bench-%d-x%d-%d", size, n, i), &countingReader{r: io.LimitReader(newContent(seed), size), n: moved}, size, digest)
			return err
		})
	}); err != nil {
		return res, err
	}
	if res.up.timedOut {
		logf("%-36s skipped: the uploads did not finish", fmt.Sprintf("REST download %s ×%d", formatSize(size), n))
		res.down.skipped = true
		return res, nil
	}
	label = fmt.Sprintf("REST download %s ×%d", formatSize(size), n)
	res.down, err = ctl.measure(ctx, label, int64(n)*size, timeout, func(ctx context.Context, moved *atomic.Int64) error {
		return all(n, func(i int) error {
			var got atomic.Int64
			v := &verifier{h: sha256.New(), n: &got}
			if err := rest.download(ctx, refs[i], io.MultiWriter(v, countingWriter{moved})); err != nil {
				return err
			}
			return v.check(size, digest)
		})
	})
	return res, err
}

// all runs f(0) … f(n-1) at once and returns their errors.
func all(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// countingWriter counts the bytes written to it.
type countingWriter struct{ n *atomic.Int64 }

func (c countingWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return len(p), nil
}

func printConcurrentTable(w io.Writer, results []concurrentResult) {
	fmt.Fprintln(w, "\nArtifacts: concurrent transfers through the REST API (the same content uploaded n times at once, then downloaded n times at once)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| size | concurrent transfers | upload MiB/s, all together | controller peak RSS, upload (at start) | download MiB/s, all together | controller peak RSS, download (at start) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	for _, r := range results {
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s |\n", formatSize(r.size), r.n,
			throughput([]measurement{r.up}), peakRSS([]measurement{r.up}), throughput([]measurement{r.down}), peakRSS([]measurement{r.down}))
	}
}

// intList is a flag of comma-separated positive integers; empty for none.
type intList []int

func (l *intList) String() string {
	parts := make([]string, len(*l))
	for i, n := range *l {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

func (l *intList) Set(v string) error {
	*l = nil
	if strings.TrimSpace(v) == "" {
		return nil
	}
	for part := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 {
			return fmt.Errorf("%q: want a positive integer", part)
		}
		*l = append(*l, n)
	}
	return nil
}
