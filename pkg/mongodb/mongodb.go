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
)

// Server is a MongoDB endpoint and how to stop it (a no-op for an external server).
type Server struct {
	// URI to connect to.
	URI  string
	stop func() error
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
		SQLiteURL: (&url.URL{Scheme: "file", Path: dir + "/"}).String(),
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
