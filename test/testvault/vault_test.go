package testvault

import (
	"bytes"
	"testing"
)

func TestRedactor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []string
		want   string
	}{
		{"plain", []string{"hello\n"}, "hello\n"},
		{"secret in a line", []string{"token s3cr3t here\n"}, "token [redacted] here\n"},
		{"secret split across writes", []string{"token s3", "cr3t\nnext\n"}, "token [redacted]\nnext\n"},
		{"unfinished line at close", []string{"tail s3cr3t"}, "tail [redacted]"},
		{"line prefix", []string{"  Unseal Key: abc=\nok\n"}, "Unseal Key: [redacted]\nok\n"},
		{"twice", []string{"s3cr3t s3cr3t\n"}, "[redacted] [redacted]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			r := &redactor{w: &out, secrets: [][]byte{[]byte("s3cr3t")}, linePrefixes: [][]byte{[]byte("Unseal Key:")}}
			for _, w := range tc.writes {
				if _, err := r.Write([]byte(w)); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("got %q, want %q", out.String(), tc.want)
			}
		})
	}
}
