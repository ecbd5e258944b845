package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Stored returns what etcd holds under the keys starting with prefix, read straight from
// etcd as the API server stored it (encrypted or not): the API server's keys are
// "/registry/<resource>/<namespace>/<name>", for example "/registry/secrets/ns/name".
func (cp *ControlPlane) Stored(ctx context.Context, prefix string) (map[string][]byte, error) {
	etcd, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{cp.env.ControlPlane.Etcd.URL.String()},
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("testenv %s: etcd client: %w", cp.Name, err)
	}
	defer etcd.Close()
	resp, err := etcd.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("testenv %s: etcd get %s: %w", cp.Name, prefix, err)
	}
	out := make(map[string][]byte, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = kv.Value
	}
	return out, nil
}

// EtcdFilesContaining returns the files of etcd's data directory (its database, write-ahead
// log and snapshots) holding b anywhere: a value written in clear is in the write-ahead log
// as soon as the write returns.
func (cp *ControlPlane) EtcdFilesContaining(b []byte) ([]string, error) {
	found, err := FilesContaining(cp.env.ControlPlane.Etcd.DataDir, b)
	if err != nil {
		return nil, fmt.Errorf("testenv %s: search etcd's data directory: %w", cp.Name, err)
	}
	return found, nil
}

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
