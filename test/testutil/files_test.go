package testutil

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestFileContains(t *testing.T) {
	// fileContains reads block+len(needle) bytes first, then block+1 after the len(needle)-1
	// bytes it keeps: its reads end at offsets end1 and end2.
	const block = 1 << 20
	needle := []byte("needle-0123456789")
	end1 := block + len(needle)
	end2 := end1 + block + 1
	at := func(offset int) []byte {
		b := bytes.Repeat([]byte{'x'}, 3*block)
		copy(b[offset:], needle)
		return b
	}
	for _, tc := range []struct {
		name string
		data []byte
		want bool
	}{
		{"at the start", at(0), true},
		{"across the first read's end", at(end1 - 5), true},
		{"across the second read's end", at(end2 - len(needle) + 1), true},
		{"just before the second read's end", at(end2 - len(needle)), true},
		{"at the very end", at(3*block - len(needle)), true},
		{"absent", bytes.Repeat([]byte{'x'}, 3*block), false},
		{"cut by the end of the file", append(bytes.Repeat([]byte{'x'}, 2*block), needle[:len(needle)-1]...), false},
		{"empty file", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := fileContains(path, needle)
			if err != nil || got != tc.want {
				t.Errorf("fileContains = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
