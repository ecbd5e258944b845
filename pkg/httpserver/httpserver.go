package httpserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// Server serves Handler on Addr until its context ends.
type Server struct {
	// Name says what is served, in logs and errors ("artifact API").
	Name string
	// Addr is the listen address (host:port).
	Addr string
	// CertFile and KeyFile make it serve HTTPS; without them it serves plain HTTP.
	CertFile, KeyFile string
	Handler           http.Handler
	Log               logr.Logger

	listening atomic.Bool
}

// Ready is a readiness check (healthz.Checker) that passes once the server listens.
func (s *Server) Ready(*http.Request) error {
	if !s.listening.Load() {
		return fmt.Errorf("%s is not listening on %s yet", s.Name, s.Addr)
	}
	return nil
}

// NeedLeaderElection is false: every replica serves.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx is done.
func (s *Server) Start(ctx context.Context) error {
	l, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("%s: listen on %s: %w", s.Name, s.Addr, err)
	}
	s.listening.Store(true)
	defer s.listening.Store(false)
	srv := &http.Server{Handler: s.Handler, ReadHeaderTimeout: 30 * time.Second}
	done := make(chan error, 1)
	go func() {
		if s.CertFile != "" {
			s.Log.Info("serving over HTTPS", "what", s.Name, "address", l.Addr().String())
			done <- srv.ServeTLS(l, s.CertFile, s.KeyFile)
		} else {
			s.Log.Info("serving over plain HTTP", "what", s.Name, "address", l.Addr().String())
			done <- srv.Serve(l)
		}
	}()
	select {
	case err := <-done:
		return fmt.Errorf("%s: %w", s.Name, err)
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(shutdownCtx)
	}
}
