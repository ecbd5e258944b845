package httpserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// Server serves Handler on Addr until its context ends.
type Server struct {
	// Name says what is served, in logs and errors ("artifact API").
	Name string
	// Addr is the listen address (host:port).
	Addr string
	// CertFile and KeyFile make it serve HTTPS; without them it serves plain HTTP. The pair is
	// read again whenever the files change, so a renewed certificate is served without a
	// restart.
	CertFile, KeyFile string
	// ClientCAFile, with CertFile, makes the server ask for client certificates and verify
	// those it gets against these CAs (a request without one goes on to the handler, which
	// decides); r.TLS.VerifiedChains holds a verified one.
	ClientCAFile string
	Handler      http.Handler
	Log          logr.Logger

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

// tlsConfig is the server's TLS configuration, and the watcher that keeps its certificate
// current (to be started); nil, nil without CertFile.
func (s *Server) tlsConfig() (*tls.Config, *certwatcher.CertWatcher, error) {
	if s.CertFile == "" {
		if s.ClientCAFile != "" {
			return nil, nil, fmt.Errorf("%s: a client CA file needs a serving certificate: client certificates come over TLS only", s.Name)
		}
		return nil, nil, nil
	}
	watcher, err := certwatcher.New(s.CertFile, s.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: certificate %s and key %s: %w", s.Name, s.CertFile, s.KeyFile, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: watcher.GetCertificate}
	if s.ClientCAFile != "" {
		pem, err := os.ReadFile(s.ClientCAFile)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: client CA: %w", s.Name, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("%s: client CA %s holds no PEM certificate", s.Name, s.ClientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, watcher, nil
}

// Start serves until ctx is done.
func (s *Server) Start(ctx context.Context) error {
	cfg, watcher, err := s.tlsConfig()
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("%s: listen on %s: %w", s.Name, s.Addr, err)
	}
	s.listening.Store(true)
	defer s.listening.Store(false)
	srv := &http.Server{Handler: s.Handler, ReadHeaderTimeout: 30 * time.Second, TLSConfig: cfg}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 2)
	if watcher != nil {
		go func() {
			if err := watcher.Start(ctx); err != nil {
				done <- fmt.Errorf("watch the certificate: %w", err)
			}
		}()
	}
	go func() {
		if cfg != nil {
			s.Log.Info("serving over HTTPS", "what", s.Name, "address", l.Addr().String(), "clientCertificates", s.ClientCAFile != "")
			done <- srv.ServeTLS(l, "", "")
		} else {
			s.Log.Info("serving over plain HTTP", "what", s.Name, "address", l.Addr().String())
			done <- srv.Serve(l)
		}
	}()
	select {
	case err := <-done:
		return errors.Join(fmt.Errorf("%s: %w", s.Name, err), srv.Close())
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(shutdownCtx)
	}
}

// Loopback reports whether addr (host:port) only listens on a loopback address: the only place
// a Server may serve plain HTTP, where no network carries what it sends.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
