package testutil

import (
	"bytes"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// FindSecrets looks for each secret (by what it is) in every regular file under dirs: as it
// is, base64-encoded, and as the DER bytes of a PEM block. It returns "<what> is in <path>"
// for each find, and how many files it read.
func FindSecrets(dirs []string, secrets map[string][]byte) (found []string, scanned int, err error) {
	needles := map[string][]byte{}
	for what, s := range secrets {
		if len(s) == 0 {
			return nil, 0, fmt.Errorf("find secrets: %s is empty", what)
		}
		needles[what] = s
		needles[what+" (base64)"] = []byte(base64.StdEncoding.EncodeToString(s))
		if b, _ := pem.Decode(s); b != nil {
			needles[what+" (DER)"] = b.Bytes
		}
	}
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			scanned++
			for what, n := range needles {
				if bytes.Contains(data, n) {
					found = append(found, what+" is in "+p)
				}
			}
			return nil
		})
		if err != nil {
			return found, scanned, fmt.Errorf("find secrets: %w", err)
		}
	}
	return found, scanned, nil
}
