package setup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, content string
		mode          os.FileMode
		want, err     string
	}{
		{name: "owner only", content: "abc.def\n", mode: 0o600, want: "abc.def"},
		{name: "read-only owner", content: " abc.def ", mode: 0o400, want: "abc.def"},
		{name: "group readable", content: "abc.def", mode: 0o640, err: "make it readable by its owner only"},
		{name: "world readable", content: "abc.def", mode: 0o604, err: "make it readable by its owner only"},
		{name: "empty", content: "\n", mode: 0o600, err: "is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			got, err := readToken(path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				if strings.Contains(err.Error(), tc.content) && strings.TrimSpace(tc.content) != "" {
					t.Errorf("the error carries the token: %v", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("readToken = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := readToken(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file: no error")
	}
}

func TestRunEnrollNeedsItsFlags(t *testing.T) {
	for _, tc := range []struct {
		opts EnrollOptions
		err  string
	}{
		{EnrollOptions{Site: "site-a"}, "--site must be namespace/name"},
		{EnrollOptions{Site: "fleet/site-a"}, "--global-url, --global-ca-file and --token-file are required"},
	} {
		if err := RunEnroll(t.Context(), tc.opts); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("RunEnroll(%+v) = %v, want %q", tc.opts, err, tc.err)
		}
	}
}
