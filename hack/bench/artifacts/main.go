package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/edgefleet/edgefleet/test/testfleet"
)

func main() {
	var (
		sizes           sizeList = []int64{256 << 20, 2 << 30}
		concurrentSizes sizeList = []int64{100 << 20}
		concurrency              = intList{1, 10, 50}
		cfg             config
	)
	flag.IntVar(&cfg.runs, "runs", 1, "Transfers per size and path; the table shows the medians.")
	flag.Uint64Var(&cfg.seed, "seed", 1, "Seed of the generated content.")
	flag.DurationVar(&cfg.timeout, "timeout", 30*time.Minute, "Stop a transfer (or a group of concurrent ones) that takes longer and record how far it got.")
	flag.StringVar(&cfg.dir, "dir", "", "Directory of the kubeconfigs, the controller's log and its database (a temporary one, removed at the end, when empty).")
	flag.BoolVar(&cfg.ratio, "ratio", true, "Measure REST API vs raw GridFS, one transfer at a time.")
	flag.Func("controller-flags", "Extra flags of the global controller, space-separated (e.g. --api-transfer-memory=64Mi).", func(v string) error {
		cfg.controllerArgs = strings.Fields(v)
		return nil
	})
	flag.Var(&sizes, "sizes", "Comma-separated content sizes of the REST API vs raw GridFS runs (e.g. 256MiB,2GiB), run smallest first.")
	flag.Var(&concurrentSizes, "concurrent-sizes", "Comma-separated content sizes of the concurrent runs (each transfer moves this much).")
	flag.Var(&concurrency, "concurrency", "Comma-separated numbers of concurrent transfers through the REST API whose controller peak RSS is measured, for each of -concurrent-sizes (empty: none).")
	flag.Parse()
	cfg.sizes, cfg.concurrentSizes, cfg.concurrency = sizes, concurrentSizes, concurrency
	if cfg.runs < 1 || cfg.timeout <= 0 || (cfg.ratio && len(sizes) == 0) || (len(concurrency) > 0 && len(concurrentSizes) == 0) || (!cfg.ratio && len(concurrency) == 0) {
		fmt.Fprintln(os.Stderr, "artifacts: need -runs >= 1, a positive -timeout, -ratio with some -sizes or some -concurrency with some -concurrent-sizes")
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "artifacts:", err)
		os.Exit(1)
	}
}

// store is one way to keep content: the REST API or raw GridFS.
type store interface {
	// upload stores size bytes of r (whose sha256 is digest) and returns a reference to them.
	upload(ctx context.Context, name string, r io.Reader, size int64, digest string) (string, error)
	// download writes the content of ref to w.
	download(ctx context.Context, ref string, w io.Writer) error
	// remove deletes the content of ref.
	remove(ctx context.Context, ref string) error
}

// result holds the measurements of one size, by path and direction.
type result struct {
	size                             int64
	restUp, rawUp, restDown, rawDown []measurement
}

// config is what the flags ask for.
type config struct {
	sizes           []int64
	concurrentSizes []int64
	concurrency     []int
	runs            int
	seed            uint64
	timeout         time.Duration
	dir             string
	ratio           bool
	controllerArgs  []string
}

func run(ctx context.Context, cfg config) (err error) {
	slices.Sort(cfg.sizes)
	slices.Sort(cfg.concurrentSizes)
	logf("starting a global control plane and bin/global-controller (embedded FerretDB) %s", strings.Join(cfg.controllerArgs, " "))
	fleet, err := testfleet.StartFleet(ctx, testfleet.FleetOptions{Dir: cfg.dir, ControllerArgs: cfg.controllerArgs})
	if err != nil {
		return err
	}
	defer func() {
		logf("stopping the global controller and the control plane")
		err = errors.Join(err, fleet.Stop())
	}()
	ctl, err := findController()
	if err != nil {
		return err
	}
	idleRSS, err := ctl.rss()
	if err != nil {
		return err
	}
	rest, err := newRESTStore(ctx, fleet)
	if err != nil {
		return err
	}
	raw, err := newRawStore(ctx, filepath.Join(fleet.Dir, "data", "ferretdb", "ferretdb.sock"))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, raw.close()) }()

	var results []result
	for _, size := range cfg.sizes {
		if !cfg.ratio {
			break
		}
		res := result{size: size}
		for r := range cfg.runs {
			if err := runOnce(ctx, ctl, rest, raw, &res, cfg.seed+uint64(r), r, cfg.timeout); err != nil {
				return err
			}
		}
		results = append(results, res)
	}
	var concurrent []concurrentResult
	for _, size := range cfg.concurrentSizes {
		for _, n := range cfg.concurrency {
			res, err := runConcurrent(ctx, ctl, rest, size, n, cfg.seed, cfg.timeout)
			if err != nil {
				return err
			}
			concurrent = append(concurrent, res)
		}
	}
	if cfg.ratio {
		printTable(os.Stdout, results, cfg.runs, idleRSS)
	}
	if len(concurrent) > 0 {
		printConcurrentTable(os.Stdout, concurrent)
	}
	return nil
}

// runOnce uploads and downloads one content through both paths, alternating which goes first,
// and deletes it again. A transfer that takes longer than timeout is stopped and recorded with
// the bytes it moved; its download is skipped.
func runOnce(ctx context.Context, ctl *controller, rest *restStore, raw *rawStore, res *result, seed uint64, r int, timeout time.Duration) (err error) {
	size := res.size
	name := fmt.Sprintf("bench-%d-run%d", size, r)
	digest, err := contentDigest(seed, size)
	if err != nil {
		return err
	}
	type path struct {
		label string
		s     store
		up    *[]measurement
		down  *[]measurement
		ref   string
	}
	paths := []*path{{label: "REST", s: rest, up: &res.restUp, down: &res.restDown}, {label: "raw GridFS", s: raw, up: &res.rawUp, down: &res.rawDown}}
	if r%2 == 1 {
		slices.Reverse(paths)
	}
	defer func() {
		for _, p := range paths {
			if p.ref != "" {
				if rmErr := p.s.remove(context.WithoutCancel(ctx), p.ref); rmErr != nil {
					err = errors.Join(err, fmt.Errorf("delete %s content %s: %w", p.label, p.ref, rmErr))
				}
			}
		}
	}()
	for _, p := range paths {
		label := fmt.Sprintf("%s upload %s (run %d)", p.label, formatSize(size), r+1)
		m, err := ctl.measure(ctx, label, size, timeout, func(ctx context.Context, n *atomic.Int64) error {
			var err error
			p.ref, err = p.s.upload(ctx, name, &countingReader{r: io.LimitReader(newContent(seed), size), n: n}, size, digest)
			return err
		})
		if err != nil {
			return err
		}
		*p.up = append(*p.up, m)
	}
	for _, p := range paths {
		label := fmt.Sprintf("%s download %s (run %d)", p.label, formatSize(size), r+1)
		if p.ref == "" {
			logf("%-36s skipped: the upload did not finish", label)
			*p.down = append(*p.down, measurement{skipped: true})
			continue
		}
		m, err := ctl.measure(ctx, label, size, timeout, func(ctx context.Context, n *atomic.Int64) error {
			v := &verifier{h: sha256.New(), n: n}
			if err := p.s.download(ctx, p.ref, v); err != nil {
				return err
			}
			return v.check(size, digest)
		})
		if err != nil {
			return err
		}
		*p.down = append(*p.down, m)
	}
	return nil
}

// measurement is one transfer.
type measurement struct {
	mibps   float64
	peakRSS int64
	// startRSS is the controller's RSS when the transfer started: the Go runtime returns the
	// memory of an earlier transfer (a raw GridFS download holds the whole file) only slowly,
	// and the peak cannot be lower.
	startRSS int64
	// timedOut is set when the transfer was stopped after the timeout; mibps is then the
	// average over the bytes it moved.
	timedOut bool
	// skipped is set for a download whose upload timed out.
	skipped bool
}

// measure runs one transfer of size bytes, which counts its bytes in n, and returns its
// throughput and the controller's peak RSS during it. It logs the progress every 30s and stops
// the transfer after timeout.
func (c *controller) measure(ctx context.Context, label string, size int64, timeout time.Duration, transfer func(context.Context, *atomic.Int64) error) (measurement, error) {
	runtime.GC() // the harness's own garbage should not slow the next transfer
	if err := c.resetPeak(); err != nil {
		return measurement{}, err
	}
	startRSS, err := c.rss()
	if err != nil {
		return measurement{}, err
	}
	var n atomic.Int64
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- transfer(tctx, &n) }()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	var (
		stopped        time.Duration // when the timeout stopped the transfer
		stoppedAt      int64         // and how far it had got
		deadline, last = tctx.Done(), int64(0)
	)
	for waiting := true; waiting; {
		select {
		case err = <-done:
			waiting = false
		case <-deadline:
			stopped, stoppedAt, deadline = time.Since(start), n.Load(), nil
		case <-tick.C:
			now := n.Load()
			logf("%-36s %s of %s, %.1f MiB/s over the last 30s", label, formatSize(now), formatSize(size), float64(now-last)/(1<<20)/30)
			last = now
		}
	}
	d := time.Since(start)
	m := measurement{mibps: float64(size) / (1 << 20) / d.Seconds(), startRSS: startRSS}
	if err != nil {
		if ctx.Err() != nil || stopped == 0 {
			return measurement{}, fmt.Errorf("%s: %w", label, err)
		}
		d = stopped
		m.timedOut = true
		m.mibps = float64(stoppedAt) / (1 << 20) / d.Seconds()
		logf("%-36s stopped after %s at %s of %s", label, timeout, formatSize(stoppedAt), formatSize(size))
	}
	if m.peakRSS, err = c.peak(); err != nil {
		return measurement{}, err
	}
	logf("%-36s %7.1f s %8.1f MiB/s   controller peak RSS %s (at start %s)", label, d.Seconds(), m.mibps, formatRSS(m.peakRSS), formatRSS(m.startRSS))
	return m, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// newContent returns an endless stream of pseudo-random bytes (ChaCha8 keyed by seed).
func newContent(seed uint64) io.Reader {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	return rand.NewChaCha8(key)
}

// contentDigest returns the sha256 of size bytes of the content of seed.
func contentDigest(seed uint64, size int64) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(newContent(seed), size)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// verifier hashes and counts what is written to it.
type verifier struct {
	h hash.Hash
	n *atomic.Int64
}

func (v *verifier) Write(p []byte) (int, error) {
	v.n.Add(int64(len(p)))
	return v.h.Write(p)
}

func (v *verifier) check(size int64, digest string) error {
	if got := hex.EncodeToString(v.h.Sum(nil)); v.n.Load() != size || got != digest {
		return fmt.Errorf("downloaded %d bytes with sha256 %s, want %d bytes with sha256 %s", v.n.Load(), got, size, digest)
	}
	return nil
}

func printTable(w io.Writer, results []result, runs int, idleRSS int64) {
	what := "one run"
	if runs > 1 {
		what = fmt.Sprintf("median of %d runs", runs)
	}
	fmt.Fprintf(w, "\nArtifacts: REST API vs raw GridFS on the same embedded FerretDB (%s; controller idle RSS %s)\n\n", what, formatRSS(idleRSS))
	fmt.Fprintln(w, "| size | path | upload MiB/s | download MiB/s | controller peak RSS, upload (at start) | controller peak RSS, download (at start) |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|")
	for _, r := range results {
		for _, p := range []struct {
			label    string
			up, down []measurement
		}{{"REST API", r.restUp, r.restDown}, {"raw GridFS", r.rawUp, r.rawDown}} {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", formatSize(r.size), p.label,
				throughput(p.up), throughput(p.down), peakRSS(p.up), peakRSS(p.down))
		}
	}
	fmt.Fprintln(w, "\n| size | REST/raw upload | REST/raw download |")
	fmt.Fprintln(w, "|---|---:|---:|")
	for _, r := range results {
		fmt.Fprintf(w, "| %s | %s | %s |\n", formatSize(r.size), ratio(r.restUp, r.rawUp), ratio(r.restDown, r.rawDown))
	}
	fmt.Fprintln(w, "\n≤: stopped at -timeout, the figure is the average up to there; —: skipped, its upload was stopped.")
	fmt.Fprintln(w, "(at start): the controller's RSS when the transfer began, which the peak includes — memory kept from the transfer before.")
}

// throughput is the median MiB/s of the runs.
func throughput(ms []measurement) string {
	vs, bound := values(ms, func(m measurement) float64 { return m.mibps })
	if len(vs) == 0 {
		return "—"
	}
	return bound + fmt.Sprintf("%.1f", medianOf(vs))
}

// peakRSS is the median peak RSS of the runs.
func peakRSS(ms []measurement) string {
	vs, _ := values(ms, func(m measurement) float64 { return float64(m.peakRSS) })
	if len(vs) == 0 {
		return "—"
	}
	starts, _ := values(ms, func(m measurement) float64 { return float64(m.startRSS) })
	return fmt.Sprintf("%s (%s)", formatRSS(int64(medianOf(vs))), formatRSS(int64(medianOf(starts))))
}

// ratio is the median of the runs' ratios: each run's two paths ran back to back, under the
// same background load.
func ratio(rest, raw []measurement) string {
	var rs []float64
	bound := ""
	for i := range rest {
		if rest[i].skipped || raw[i].skipped {
			continue
		}
		if rest[i].timedOut {
			bound = "≤ "
		}
		rs = append(rs, rest[i].mibps/raw[i].mibps)
	}
	if len(rs) == 0 {
		return "—"
	}
	return bound + fmt.Sprintf("%.2f", medianOf(rs))
}

// values returns f of the measurements that ran, and "≤ " when one of them timed out.
func values(ms []measurement, f func(measurement) float64) ([]float64, string) {
	var vs []float64
	bound := ""
	for _, m := range ms {
		if m.skipped {
			continue
		}
		if m.timedOut {
			bound = "≤ "
		}
		vs = append(vs, f(m))
	}
	return vs, bound
}

func medianOf(vs []float64) float64 {
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

// sizeList is a flag of comma-separated sizes with binary units (B, KiB, MiB, GiB).
type sizeList []int64

func (s *sizeList) String() string {
	parts := make([]string, len(*s))
	for i, n := range *s {
		parts[i] = formatSize(n)
	}
	return strings.Join(parts, ",")
}

func (s *sizeList) Set(v string) error {
	*s = nil
	for _, part := range strings.Split(v, ",") {
		n, err := parseSize(strings.TrimSpace(part))
		if err != nil {
			return err
		}
		*s = append(*s, n)
	}
	return nil
}

var units = []struct {
	suffix string
	n      int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

func parseSize(v string) (int64, error) {
	for _, u := range units {
		if num, ok := strings.CutSuffix(v, u.suffix); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("size %q: want a positive integer with unit GiB, MiB, KiB or B", v)
			}
			return n * u.n, nil
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("size %q: want a positive integer with unit GiB, MiB, KiB or B", v)
	}
	return n, nil
}

func formatSize(n int64) string {
	for _, u := range units[:3] {
		if n >= u.n && n%u.n == 0 {
			return fmt.Sprintf("%d %s", n/u.n, u.suffix)
		}
	}
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d B", n)
}

func formatRSS(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
