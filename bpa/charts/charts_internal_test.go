package charts

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncate(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{"short", "Install complete", 20, "Install complete"},
		{"exact", "abcde", 5, "abcde"},
		{"cut", "abcdefgh", 6, "abc…"},
		{"not inside a rune", "ab" + strings.Repeat("é", 4), 6, "ab…"},
		{"after a whole rune", "ab" + strings.Repeat("é", 4), 7, "abé…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := truncate(tt.in, tt.n)
			if got != tt.want || len(got) > tt.n || !utf8.ValidString(got) {
				t.Errorf("truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
			}
		})
	}
}
