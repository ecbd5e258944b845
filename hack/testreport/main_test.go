package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2/types"
)

func TestFilterAndTable(t *testing.T) {
	events := strings.Join([]string{
		`{"Action":"start","Package":"example.com/a"}`,
		`{"Action":"output","Package":"example.com/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}`,
		`{"Action":"output","Package":"example.com/a","Test":"TestOK","Output":"quiet line\n"}`,
		`{"Action":"pass","Package":"example.com/a","Test":"TestOK","Elapsed":1}`,
		`{"Action":"output","Package":"example.com/a","Test":"TestBad","Output":"why it failed\n"}`,
		`{"Action":"fail","Package":"example.com/a","Test":"TestBad","Elapsed":2}`,
		`{"Action":"pass","Package":"example.com/a","Test":"TestSlow/part","Elapsed":31}`,
		`{"Action":"pass","Package":"example.com/a","Test":"TestSlow","Elapsed":31}`,
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
	// A ginkgo report of package e's suite: a slow bed (BeforeAll), a slow spec, a fast one and
	// a skipped one; and the report of a suite that never wrote one.
	suite := types.Report{SuitePath: "/src/example.com/e", SpecReports: types.SpecReports{
		{LeafNodeType: types.NodeTypeBeforeAll, State: types.SpecStatePassed, RunTime: 40 * time.Second},
		{LeafNodeText: "builds the cluster", State: types.SpecStateFailed, RunTime: 50 * time.Second},
		{LeafNodeText: "is quick", State: types.SpecStatePassed, RunTime: time.Second},
		{LeafNodeText: "was skipped", State: types.SpecStateSkipped, RunTime: 45 * time.Second},
	}}
	report := filepath.Join(t.TempDir(), "e.ginkgo.json")
	b, err := json.Marshal([]types.Report{suite})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(report, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := printTable(&table, []string{file, other, report, filepath.Join(t.TempDir(), "never.ginkgo.json")}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	wantOrder := []string{"example.com/e", "example.com/b", "example.com/a", "63.5", "100.0", "", "top-level tests and ginkgo specs of 30 s or more",
		"50.0  failed  realhosts  example.com/e: builds the cluster", "40.0  passed  realhosts  example.com/e: BeforeAll", "31.0  pass    main       example.com/a: TestSlow"}
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
