package charts_test

import (
	"regexp"
	"testing"

	"github.com/edgefleet/edgefleet/bpa/charts"
)

func TestFingerprint(t *testing.T) {
	archive := []byte("an archive")
	base := map[string]any{"greeting": "hi", "replicas": 2, "nested": map[string]any{"a": []any{1, "b"}}}
	tests := []struct {
		name     string
		archive  []byte
		values   map[string]any
		wantSame bool // as archive with base
		wantErr  bool
	}{
		{"same", archive, map[string]any{"greeting": "hi", "replicas": 2, "nested": map[string]any{"a": []any{1, "b"}}}, true, false},
		{"numbers of other Go types", archive, map[string]any{"greeting": "hi", "replicas": 2.0, "nested": map[string]any{"a": []any{int64(1), "b"}}}, true, false},
		{"typed maps and slices", archive, map[string]any{"greeting": "hi", "replicas": uint8(2), "nested": map[string][]any{"a": {1.0, "b"}}}, true, false},
		{"another value", archive, map[string]any{"greeting": "hi", "replicas": 3, "nested": map[string]any{"a": []any{1, "b"}}}, false, false},
		{"a value more", archive, map[string]any{"greeting": "hi", "replicas": 2, "nested": map[string]any{"a": []any{1, "b"}}, "x": nil}, false, false},
		{"order in a list", archive, map[string]any{"greeting": "hi", "replicas": 2, "nested": map[string]any{"a": []any{"b", 1}}}, false, false},
		{"another archive", []byte("an archive!"), base, false, false},
		{"not JSON", archive, map[string]any{"c": make(chan int)}, false, true},
	}
	want, err := charts.Fingerprint(archive, base)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[a-z2-7]{52}$`).MatchString(want) {
		t.Errorf("fingerprint %q is not 52 characters of [a-z2-7] (a label value)", want)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := charts.Fingerprint(tt.archive, tt.values)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want one: %v", err, tt.wantErr)
			}
			if err == nil && (got == want) != tt.wantSame {
				t.Errorf("fingerprint %s, base %s: same %v, want %v", got, want, got == want, tt.wantSame)
			}
		})
	}

	// No values and empty values are the same.
	empty, err1 := charts.Fingerprint(archive, map[string]any{})
	none, err2 := charts.Fingerprint(archive, nil)
	if err1 != nil || err2 != nil || empty != none || empty == want {
		t.Errorf("empty %s (%v), nil %s (%v)", empty, err1, none, err2)
	}
}
