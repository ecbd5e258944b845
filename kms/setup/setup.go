package setup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	kmsapi "k8s.io/kms/apis/v2"
	"k8s.io/kms/pkg/service"

	"github.com/edgefleet/edgefleet/kms/transit"
	"github.com/edgefleet/edgefleet/pkg/vaultauth"
)

// connectionTimeout bounds the handshake of a connection to the socket.
const connectionTimeout = 10 * time.Second

// Run serves the KMS v2 API on opts.Socket, and /healthz on opts.HealthAddr, until ctx ends.
func Run(ctx context.Context, opts Options, log *slog.Logger) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	vault, err := vaultauth.Connect(ctx, opts.Vault, logr.FromSlogHandler(log.Handler()))
	if err != nil {
		return err
	}
	svc := newLogged(transit.New(vault.Client.Logical(), opts.TransitMount, opts.TransitKey, opts.Vault.Timeout), log)

	// The socket is for the API server alone: created 0600 (the umask is the only way, the
	// library creates it), in a directory only its owner may enter.
	syscall.Umask(0o077)
	if err := prepareSocket(opts.Socket); err != nil {
		return err
	}
	grpcServer := service.NewGRPCService(opts.Socket, connectionTimeout, svc)
	served := make(chan error, 2)
	go func() { served <- grpcServer.ListenAndServe() }()
	defer func() { _ = os.Remove(opts.Socket) }()
	defer grpcServer.Shutdown()
	log.Info("serving the KMS v2 API", "socket", opts.Socket, "vault", opts.Vault.Addr, "vaultAuth", opts.Vault.Method, "transitKey", opts.TransitMount+"/"+opts.TransitKey)

	if opts.HealthAddr != "0" {
		stopHealth, err := serveHealth(opts.HealthAddr, opts.Socket, opts.Vault.Timeout, served)
		if err != nil {
			return err
		}
		defer stopHealth()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-served:
		return err
	}
}

// prepareSocket makes the socket's directory (0700) and removes a socket a previous run left
// there; anything else at the socket's path is refused.
func prepareSocket(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("socket %s: %w", path, err)
	case st.Mode().Type() != fs.ModeSocket:
		return fmt.Errorf("socket %s: something other than a socket is there", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove the old socket %s: %w", path, err)
	}
	return nil
}

// serveHealth serves /healthz on addr: 200 when a Status call on the plugin's own socket
// answers healthy, as the API server would see it, 503 otherwise. Errors of the server go to
// served. It returns a function that stops the server.
func serveHealth(addr, socket string, timeout time.Duration, served chan<- error) (func(), error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("health check client: %w", err)
	}
	kms := kmsapi.NewKeyManagementServiceClient(conn)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		status, err := kms.Status(ctx, &kmsapi.StatusRequest{})
		switch {
		case err != nil:
			http.Error(w, "unhealthy: "+err.Error(), http.StatusServiceUnavailable)
		case status.Healthz != "ok":
			http.Error(w, "unhealthy: "+status.Healthz, http.StatusServiceUnavailable)
		default:
			fmt.Fprintf(w, "ok, key ID %s\n", status.KeyId)
		}
	})
	l, err := net.Listen("tcp", addr)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("health endpoint: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			served <- fmt.Errorf("health endpoint: %w", err)
		}
	}()
	return func() { _ = srv.Close(); _ = conn.Close() }, nil
}
