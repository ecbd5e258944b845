package artifactapi

import (
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
)

// byteRange is one satisfiable range-spec of a Range header: first and last are byte
// positions, last < size.
type byteRange struct{ first, last int64 }

// checkRange evaluates the Range header of a request for content of size bytes as RFC 9110
// (14.1.1, 14.2) says, before http.ServeContent does, whose parser takes a suffix-length of 0
// ("bytes=-0"), or any suffix of empty content, for a range of zero bytes (206 with
// "bytes 1000-999/1000"), and answers a malformed header with a 416 without Content-Range. It
// returns the satisfiable ranges in canonical form ("bytes=first-last,...", for ServeContent to
// serve), "" when the request has no Range header or one of another unit than bytes (which
// RFC 9110 says to ignore), and an error saying what is wrong when the
// header is malformed or no range in it is satisfiable (416).
func checkRange(header string, size int64) (string, error) {
	if header == "" {
		return "", nil
	}
	unit, set, ok := strings.Cut(header, "=")
	if !ok {
		return "", fmt.Errorf("header Range %q: want bytes=first-last, bytes=first- or bytes=-suffix-length (comma-separated)", header)
	}
	if !strings.EqualFold(textproto.TrimString(unit), "bytes") {
		return "", nil // RFC 9110 14.2: a range unit the server does not know is ignored
	}
	var ranges []string
	specs := 0
	for spec := range strings.SplitSeq(set, ",") {
		spec = textproto.TrimString(spec)
		if spec == "" {
			continue // RFC 9110 5.6.1: empty list elements are ignored
		}
		specs++
		r, satisfiable, err := parseRangeSpec(spec, size)
		if err != nil {
			return "", fmt.Errorf("header Range %q: %w", header, err)
		}
		if satisfiable {
			ranges = append(ranges, fmt.Sprintf("%d-%d", r.first, r.last))
		}
	}
	switch {
	case specs == 0:
		return "", fmt.Errorf("header Range %q has no range", header)
	case len(ranges) == 0:
		return "", fmt.Errorf("header Range %q: no range is satisfiable on content of %d bytes (a range must start before the end; a suffix must be at least 1 byte long)", header, size)
	}
	return "bytes=" + strings.Join(ranges, ","), nil
}

// parseRangeSpec parses one int-range ("first-last", "first-") or suffix-range ("-length") and
// tells whether it selects at least one byte of content of size bytes.
func parseRangeSpec(spec string, size int64) (byteRange, bool, error) {
	before, after, ok := strings.Cut(spec, "-")
	if !ok {
		return byteRange{}, false, fmt.Errorf("range %q has no '-'", spec)
	}
	if before == "" {
		n, err := parsePos(after)
		if err != nil {
			return byteRange{}, false, fmt.Errorf("suffix-length of %q: %w", spec, err)
		}
		if n == 0 || size == 0 {
			return byteRange{}, false, nil
		}
		return byteRange{first: size - min(n, size), last: size - 1}, true, nil
	}
	first, err := parsePos(before)
	if err != nil {
		return byteRange{}, false, fmt.Errorf("first position of %q: %w", spec, err)
	}
	last := size - 1
	if after != "" {
		if last, err = parsePos(after); err != nil {
			return byteRange{}, false, fmt.Errorf("last position of %q: %w", spec, err)
		}
		if last < first {
			return byteRange{}, false, fmt.Errorf("range %q ends before it starts", spec)
		}
	}
	if first >= size {
		return byteRange{}, false, nil
	}
	return byteRange{first: first, last: min(last, size-1)}, true, nil
}

// parsePos parses 1*DIGIT; positions beyond int64 are refused.
func parsePos(s string) (int64, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a number of digits", s)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return n, nil
}

// rangeApplies tells whether http.ServeContent would evaluate the Range header of r for
// content with this (strong) ETag and no modification time: not when an If-Match fails (412)
// or an If-None-Match matches (304) first, nor when If-Range names other content (the whole
// content is sent).
func rangeApplies(r *http.Request, etag string) bool {
	if im := r.Header.Get("If-Match"); im != "" && !etagListHas(im, etag, false) {
		return false
	}
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagListHas(inm, etag, true) {
		return false
	}
	ir := r.Header.Get("If-Range")
	return ir == "" || textproto.TrimString(ir) == etag
}

// etagListHas tells whether a comma-separated entity-tag list (or "*") has etag, comparing
// weakly (a W/ prefix ignored) when weak.
func etagListHas(list, etag string, weak bool) bool {
	if textproto.TrimString(list) == "*" {
		return true
	}
	for t := range strings.SplitSeq(list, ",") {
		t = textproto.TrimString(t)
		if weak {
			t = strings.TrimPrefix(t, "W/")
		}
		if t == etag {
			return true
		}
	}
	return false
}
