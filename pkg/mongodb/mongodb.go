package mongodb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"golang.org/x/sys/unix"
)

// Server is a MongoDB endpoint and how to stop it (a no-op for an external server).
type Server struct {
	// URI to connect to.
	URI  string
	stop func() error
	// dir holds an embedded server's files; empty for an external server.
	dir string
}

// walLimit is the size to which SQLite cuts a database's write-ahead log when it starts it
// over after a checkpoint: without a limit the log keeps the size of the largest transaction
// since it was opened (a VACUUM writes the whole database into it). SQLite checkpoints every
// 1,000 pages (4 MiB), so in steady state the log is about that size anyway.
const walLimit = 4 << 20

// pageCacheKiB is each SQLite connection's page cache. FerretDB opens a connection per query in
// flight (up to 100; each download holds one for its cursor), and SQLite's default of 2,000 KiB
// each took about 100 MiB outside the Go heap with 50 downloads; blobs are read once, in order,
// so a large cache buys them nothing.
const pageCacheKiB = 256

// DiskBytes is the size on disk of an embedded server's database: its SQLite file, write-ahead
// log and shared-memory index (FerretDB keeps each database in a file of its own). It fails
// for an external server.
func (s *Server) DiskBytes(database string) (int64, error) {
	if s.dir == "" {
		return 0, fmt.Errorf("size of database %s: not an embedded server", database)
	}
	var n int64
	for _, suffix := range []string{"", "-wal", "-shm"} {
		fi, err := os.Stat(filepath.Join(s.dir, database+".sqlite"+suffix))
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return 0, fmt.Errorf("size of database %s: %w", database, err)
		default:
			n += fi.Size()
		}
	}
	return n, nil
}

// FreeBytes is the free space of the file system of an embedded server's files: what the
// process may still write there (statfs's blocks available to unprivileged users). It fails for
// an external server, whose disk this process cannot see.
func (s *Server) FreeBytes() (int64, error) {
	if s.dir == "" {
		return 0, errors.New("free space of the database's volume: not an embedded server")
	}
	var st unix.Statfs_t
	if err := unix.Statfs(s.dir, &st); err != nil {
		return 0, fmt.Errorf("free space of the database's volume: statfs %s: %w", s.dir, err)
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// Stop stops an embedded server and waits for it; it does nothing for an external one.
func (s *Server) Stop() error {
	if s.stop == nil {
		return nil
	}
	return s.stop()
}

// External returns the server at uri.
func External(uri string) *Server { return &Server{URI: uri} }

// StartEmbedded starts FerretDB in-process with its SQLite files in dir (created 0700).
func StartEmbedded(dir string, logger *slog.Logger) (*Server, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("embedded FerretDB data directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create embedded FerretDB data directory %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("restrict embedded FerretDB data directory %s: %w", dir, err)
	}
	socket := filepath.Join(dir, "ferretdb.sock")
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", socket, err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{Unix: socket},
		Logger:    logger,
		Handler:   "sqlite",
		SQLiteURL: (&url.URL{Scheme: "file", Path: dir + "/", RawQuery: url.Values{"_pragma": {fmt.Sprintf("journal_size_limit(%d)", walLimit), fmt.Sprintf("cache_size(-%d)", pageCacheKiB)}}.Encode()}).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("start embedded FerretDB in %s: %w", dir, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()

	// Wait for the socket.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(socket); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			return nil, fmt.Errorf("embedded FerretDB did not listen on %s within 30s", socket)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return &Server{
		URI: "mongodb://" + url.PathEscape(socket) + "/",
		dir: dir,
		stop: func() error {
			cancel()
			return <-done
		},
	}, nil
}

// Connect connects to the server and checks that it answers.
func Connect(ctx context.Context, uri string) (*mongo.Client, error) {
	c, err := mongo.Connect(options.Client().ApplyURI(uri).SetAppName("edgefleet"))
	if err != nil {
		return nil, fmt.Errorf("connect to MongoDB: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.Ping(pingCtx, nil); err != nil {
		_ = c.Disconnect(context.Background())
		return nil, fmt.Errorf("ping MongoDB: %w", err)
	}
	return c, nil
}
