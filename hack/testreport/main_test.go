package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFilterAndTable(t *testing.T) {
	events := strings.Join([]string{
		`{"Action":"start","Package":"example.com/a"}`,
		`{"Action":"output","Package":"example.com/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}`,
		`{"Action":"output","Package":"example.com/a","Test":"TestOK","Output":"quiet line\n"}`,
		`{"Action":"pass","Package":"example.com/a","Test":"TestOK","Elapsed":1}`,
		`{"Action":"output","Package":"example.com/a","Test":"TestBad","Output":"why it failed\n"}`,
		`{"Action":"fail","Package":"example.com/a","Test":"TestBad","Elapsed":2}`,
		`{"Action":"output","Package":"example.com/a","Output":"FAIL\texample.com/a\t3.5s\n"}`,
		`{"Action":"fail","Package":"example.com/a","Elapsed":3.5}`,
		`{"Action":"output","Package":"example.com/b","Test":"TestHung","Output":"hung here\n"}`,
		`{"Action":"output","Package":"example.com/b","Output":"panic: test timed out\n"}`,
		`{"Action":"fail","Package":"example.com/b","Elapsed":60}`,
		`{"Action":"build-output","ImportPath":"example.com/c","Output":"c.go:1: syntax error\n"}`,
		`# a line that is not an event`,
		`{"Action":"skip","Package":"example.com/d","Elapsed":0}`,
	}, "\n")
	file := filepath.Join(t.TempDir(), "main.json")
	var out bytes.Buffer
	if err := filter(strings.NewReader(events), &out, file, "main"); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"why it failed\n", "FAIL\texample.com/a\t3.5s\n", "panic: test timed out\n", "--- unfinished TestHung:\nhung here\n", "c.go:1: syntax error\n", "# a line that is not an event\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("the filtered output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "quiet line") {
		t.Errorf("a passing test's output was printed:\n%s", got)
	}

	other := filepath.Join(t.TempDir(), "realhosts.json")
	if err := os.WriteFile(other, []byte(`{"lane":"realhosts","package":"example.com/e","result":"pass","seconds":100}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := printTable(&table, []string{file, other}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	wantOrder := []string{"example.com/e", "example.com/b", "example.com/a", "63.5", "100.0"}
	if len(lines) != 1+len(wantOrder) {
		t.Fatalf("want a header and %d rows, got:\n%s", len(wantOrder), table.String())
	}
	for i, want := range wantOrder {
		if !strings.Contains(lines[i+1], want) {
			t.Errorf("row %d = %q, want it to name %s", i+1, lines[i+1], want)
		}
	}
	if strings.Contains(table.String(), "example.com/d") {
		t.Errorf("a package without tests is in the table:\n%s", table.String())
	}
}
