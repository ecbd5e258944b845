package artifactapi

import "testing"

func TestCheckRange(t *testing.T) {
	const size = 1000
	tests := []struct {
		header, want string
		fails        bool
	}{
		{header: "", want: ""},
		{header: "bytes=0-0", want: "bytes=0-0"},
		{header: "bytes=-10", want: "bytes=990-999"},
		{header: "bytes=-5000", want: "bytes=0-999"},
		{header: "bytes=990-", want: "bytes=990-999"},
		{header: "bytes=990-5000", want: "bytes=990-999"},
		{header: "Bytes = 1-2 , , 3-4", want: "bytes=1-2,3-4"},
		{header: "bytes=-0,0-1", want: "bytes=0-1"},
		{header: "bytes=1000-,0-1", want: "bytes=0-1"},
		{header: "items=0-1", want: ""},
		{header: "bytes=-0", fails: true},
		{header: "bytes=-000", fails: true},
		{header: "bytes=1000-", fails: true},
		{header: "bytes=-0,1000-2000", fails: true},
		{header: "bytes=5-3", fails: true},
		{header: "bytes=+1-2", fails: true},
		{header: "bytes=1--2", fails: true},
		{header: "bytes=1", fails: true},
		{header: "bytes=", fails: true},
		{header: "bytes=0-99999999999999999999", fails: true},
		{header: "0-1", fails: true},
	}
	for _, tt := range tests {
		got, err := checkRange(tt.header, size)
		if (err != nil) != tt.fails || got != tt.want {
			t.Errorf("checkRange(%q) = %q, %v; want %q, failing %v", tt.header, got, err, tt.want, tt.fails)
		}
	}
	if got, err := checkRange("bytes=-1", 0); err == nil {
		t.Errorf("a suffix of empty content = %q, want an error", got)
	}
}
