package testutil

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// FilesContaining returns the regular files under dir holding b anywhere (an etcd data
// directory of a test host's, for one).
func FilesContaining(dir string, b []byte) ([]string, error) {
	if len(b) == 0 {
		return nil, errors.New("testenv: search files for nothing")
	}
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		ok, err := fileContains(path, b)
		if ok {
			found = append(found, path)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}

// fileContains reads path in blocks (etcd's write-ahead log files are 64 MiB), keeping the
// last len(b)-1 bytes of each block so a match across two blocks is found.
func fileContains(path string, b []byte) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	buf := make([]byte, 0, 1<<20+len(b))
	for {
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if bytes.Contains(buf, b) {
			return true, nil
		}
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		keep := min(len(buf), len(b)-1)
		buf = append(buf[:0], buf[len(buf)-keep:]...)
	}
}
