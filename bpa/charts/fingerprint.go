package charts

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// FingerprintLabel is the helm storage label holding the fingerprint (Fingerprint) of the
// archive and values a revision was made from.
const FingerprintLabel = "bpa.edgefleet.io/chart-fingerprint"

// fingerprintEncoding writes a sha256 as 52 characters of [a-z2-7], a valid label value
// (hex would be 64, one more than a label value may have).
var fingerprintEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// Fingerprint is what decides whether a release must change: the sha256 of the chart archive's
// sha256 and of the values' canonical JSON (object keys sorted, no insignificant space, numbers
// as JSON numbers, so 1 and 1.0 are the same value, and nil values the same as empty ones),
// written as 52 lower-case base32 characters to fit a label value.
func Fingerprint(archive []byte, values map[string]any) (string, error) {
	canonical, err := canonicalValues(values)
	if err != nil {
		return "", err
	}
	return fingerprint(archive, canonical), nil
}

func fingerprint(archive, canonicalValues []byte) string {
	a := sha256.Sum256(archive)
	h := sha256.New()
	// The archive's digest has a fixed length, so nothing the values hold can shift it.
	fmt.Fprintf(h, "edgefleet chart fingerprint v1\narchive sha256:%s\nvalues ", hex.EncodeToString(a[:]))
	h.Write(canonicalValues)
	return strings.ToLower(fingerprintEncoding.EncodeToString(h.Sum(nil)))
}

// canonicalValues is values as canonical JSON: encoding/json sorts object keys, and numbers
// written from Go ints and floats of the same value are read back and written again the same.
func canonicalValues(values map[string]any) ([]byte, error) {
	if len(values) == 0 {
		return []byte("{}"), nil
	}
	raw, err := json.Marshal(values)
	if err != nil {
		return nil, fmt.Errorf("values are not JSON: %w", err)
	}
	// A round trip through any makes every number a float64 and every object a map, whatever
	// Go types the values were given in, so equal values give equal bytes.
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("values are not JSON: %w", err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("values are not JSON: %w", err)
	}
	return out, nil
}

// decodeValues gives helm its own copy of the values, as JSON would give them back: helm may
// change the map it is given, and stores the values as JSON anyway.
func decodeValues(canonical []byte) (map[string]any, error) {
	var v map[string]any
	if err := json.Unmarshal(canonical, &v); err != nil {
		return nil, fmt.Errorf("values are not JSON: %w", err)
	}
	return v, nil
}
