package sitelogs

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

func TestRingKeepsTheNewestLinesWithinItsBounds(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	r := NewRing(3, 1000)
	for i := range 5 {
		r.add(at(i), fmt.Sprintf("line %d\n", i))
	}
	lines, truncated, oldest := r.Tail(10, time.Time{}, 1000)
	if got := strings.Join(lines, ","); got != "line 2,line 3,line 4" || !truncated || !oldest.Equal(at(2)) {
		t.Errorf("a ring of 3 lines after 5: %q truncated=%v oldest=%v; want the newest 3, truncated, oldest line 2's time", got, truncated, oldest)
	}
	// Lines after since only; the dropped ones were older, so nothing is missing.
	lines, truncated, _ = r.Tail(10, at(2), 1000)
	if got := strings.Join(lines, ","); got != "line 3,line 4" || truncated {
		t.Errorf("since line 2's time: %q truncated=%v; want lines 3 and 4, not truncated", got, truncated)
	}
	// Since before what the ring holds: the ring dropped lines the reader wanted.
	if _, truncated, _ = r.Tail(10, at(0), 1000); !truncated {
		t.Error("since before the oldest line kept: not truncated")
	}
	// n and maxBytes bound the answer; the newest lines win.
	lines, truncated, _ = r.Tail(2, time.Time{}, 1000)
	if got := strings.Join(lines, ","); got != "line 3,line 4" || !truncated {
		t.Errorf("tail 2: %q truncated=%v", got, truncated)
	}
	lines, truncated, _ = r.Tail(10, time.Time{}, len("line 4")+3)
	if got := strings.Join(lines, ","); got != "line 4" || !truncated {
		t.Errorf("tail within 9 bytes: %q truncated=%v", got, truncated)
	}
	// Nothing new since the newest line.
	if lines, truncated, _ = r.Tail(10, at(4), 1000); len(lines) != 0 || truncated {
		t.Errorf("since the newest line: %q truncated=%v; want nothing", lines, truncated)
	}
}

func TestRingBoundsBytes(t *testing.T) {
	r := NewRing(100, 10)
	now := time.Now()
	r.add(now, "aaaa")
	r.add(now, "bbbb")
	r.add(now, "cccc") // 12 bytes: aaaa goes
	r.add(now, strings.Repeat("x", 25))
	lines, truncated, _ := r.Tail(100, time.Time{}, 100)
	if len(lines) != 1 || lines[0] != strings.Repeat("x", 10) || !truncated {
		t.Errorf("a 10-byte ring after a 25-byte line: %q truncated=%v; want only that line cut to 10 bytes", lines, truncated)
	}
	if r.bytes != 10 {
		t.Errorf("the ring counts %d bytes, holds 10", r.bytes)
	}
}

func TestTeeKeepsInfoAndAboveAsJSON(t *testing.T) {
	r := NewRing(100, 1<<20)
	log := zap.NewNop().WithOptions(r.Tee()).Named("bpa")
	log.Debug("not kept")
	log.With(zap.String("site", "store-1")).Info("installed", zap.Int("hosts", 3))
	log.Error("failed", zap.String("host", "cp-0"))
	lines, _, oldest := r.Tail(100, time.Time{}, 1<<20)
	if len(lines) != 2 {
		t.Fatalf("kept %d lines, want 2 (info and error, not debug): %q", len(lines), lines)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatalf("line %q is not JSON: %v", lines[0], err)
	}
	ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(first["ts"]))
	if err != nil || !ts.Equal(oldest) {
		t.Errorf("ts %v (%v) is not the time the ring keeps the line at, %v", first["ts"], err, oldest)
	}
	for k, want := range map[string]any{"level": "info", "logger": "bpa", "msg": "installed", "site": "store-1", "hosts": 3.0} {
		if first[k] != want {
			t.Errorf("%s = %v, want %v (line %s)", k, first[k], want, lines[0])
		}
	}
	if !strings.Contains(lines[1], `"level":"error"`) || !strings.Contains(lines[1], `"host":"cp-0"`) {
		t.Errorf("error line %s", lines[1])
	}
}
