package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCPUAccount feeds made-up snapshots (no /proc) through the account: a test binary of
// package a with a long-running child and a short-lived grandchild chain, and the go tool
// outside any test. Every CPU second the processes used after the first snapshot is counted
// once, at the package whose test binary started it.
func TestCPUAccount(t *testing.T) {
	var a cpuAccount
	// Before: what the processes used until then is not counted.
	a.add(snapshot{
		1:  {ppid: 0, start: 1, comm: "make", cpu: 5},
		10: {ppid: 1, start: 2, comm: "go", cpu: 50, children: 100},
		20: {ppid: 1, start: 3, comm: "a.test", pkg: "a", cpu: 1},
		21: {ppid: 20, start: 4, comm: "kube-apiserver", cpu: 10},
		22: {ppid: 20, start: 5, comm: "sh", cpu: 0.5},
		23: {ppid: 22, start: 6, comm: "etcdctl", cpu: 0.5},
	})
	// kube-apiserver used 4 s; the shell and its etcdctl exited, reaped by the test binary,
	// after 1 s more of the shell and 2 s more of etcdctl; the go tool reaped a compiler of 7 s
	// never seen; a new PID 23 is another program.
	a.add(snapshot{
		1:  {ppid: 0, start: 1, comm: "make", cpu: 5},
		10: {ppid: 1, start: 2, comm: "go", cpu: 51, children: 107},
		20: {ppid: 1, start: 3, comm: "a.test", pkg: "a", cpu: 2, children: 0.5 + 1 + 0.5 + 2},
		21: {ppid: 20, start: 4, comm: "kube-apiserver", cpu: 14},
		23: {ppid: 21, start: 9, comm: "kubelet", cpu: 3},
	})
	got := map[string]float64{}
	for _, u := range a.uses() {
		got[u.Package+": "+u.Program] = u.Seconds
	}
	want := map[string]float64{
		"a: a.test":                          1,
		"a: a.test (exited children)":        3, // the shell's 1 s and etcdctl's 2 s after the first snapshot
		"a: kube-apiserver":                  4,
		"a: kubelet":                         3,
		noPackage + ": go":                   1,
		noPackage + ": go (exited children)": 7,
	}
	if len(got) != len(want) {
		t.Errorf("counted %v, want %v", got, want)
	}
	for k, w := range want {
		if g := got[k]; g < w-1e-9 || g > w+1e-9 {
			t.Errorf("%s: %.2f s, want %.2f (all: %v)", k, g, w, got)
		}
	}

	file := filepath.Join(t.TempDir(), "run.cpu.json")
	data, err := json.Marshal(cpuRecord{Seconds: 10, Cores: 2, Busy: 19, Use: a.uses()})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printTable(&out, []string{file}); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"2 cores busy 19 of 20 CPU-seconds (95%) over 10 s", "     11  57.9%  a: kube-apiserver 4, a.test (exited children) 3, kubelet 3, a.test 1",
		"      8  42.1%  " + noPackage + ": go (exited children) 7, go 1"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("no line %q in:\n%s", line, out.String())
		}
	}
}
