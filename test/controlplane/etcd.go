package controlplane

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/edgefleet/edgefleet/test/testutil"
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
	found, err := testutil.FilesContaining(cp.env.ControlPlane.Etcd.DataDir, b)
	if err != nil {
		return nil, fmt.Errorf("testenv %s: search etcd's data directory: %w", cp.Name, err)
	}
	return found, nil
}
