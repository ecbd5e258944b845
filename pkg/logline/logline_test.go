package logline_test

import (
	"testing"
	"time"

	"github.com/edgefleet/edgefleet/pkg/logline"
)

func TestParseAndRender(t *testing.T) {
	for _, tc := range []struct {
		name, line, want string
		wantTime         time.Time
	}{
		{"RFC 3339 ts, fields in order", `{"ts":"2026-11-24T18:00:01.5Z","level":"info","logger":"site","msg":"probed","site":"a b","hosts":3,"ok":true}`,
			`2026-11-24T18:00:01.500000Z INFO site probed site="a b" hosts=3 ok=true`, time.Date(2026, 11, 24, 18, 0, 1, 5e8, time.UTC)},
		{"float ts", `{"ts":1764007201.25,"level":"error","msg":"failed","error":"dial: refused"}`,
			`2025-11-24T18:00:01.250000Z ERROR failed error="dial: refused"`, time.Date(2025, 11, 24, 18, 0, 1, 25e7, time.UTC)},
		{"nested value as JSON", `{"msg":"m","obj":{"a": 1}}`, `m obj={"a":1}`, time.Time{}},
		{"not JSON, as is", `panic: runtime error`, `panic: runtime error`, time.Time{}},
		{"a JSON array is not a log line", `[1,2]`, `[1,2]`, time.Time{}},
		{"control characters replaced", "{\"msg\":\"red \\u001b[31m\\nx\"}", "red ?[31m?x", time.Time{}},
		{"raw control characters replaced", "oops\x1b[2J", "oops?[2J", time.Time{}},
	} {
		e := logline.Parse(tc.line)
		if got := e.Render(); got != tc.want {
			t.Errorf("%s: rendered %q; want %q", tc.name, got, tc.want)
		}
		if !e.Time.Equal(tc.wantTime) {
			t.Errorf("%s: time %s; want %s", tc.name, e.Time, tc.wantTime)
		}
	}
}
