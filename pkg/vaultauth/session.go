package vaultauth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/go-logr/logr"
	vaultapi "github.com/hashicorp/vault/api"
	k8sauth "github.com/hashicorp/vault/api/auth/kubernetes"
)

// maxTokenFile bounds what is read of a token file (ServiceAccount tokens are a few KiB).
const maxTokenFile = 64 << 10

// Session is a component's authenticated Vault client and what keeps its token alive.
type Session struct {
	// Client carries the current token: components use it as it is (its token changes under
	// them when the keeper logs in again).
	Client *vaultapi.Client

	keeper *keeper // nil with MethodToken
	done   chan struct{}
}

// Connect returns a client of the Vault at opts.Addr authenticated as opts say. With
// MethodKubernetes it has logged in once (a failure of that login is returned) and keeps its
// token alive in a goroutine of its own until ctx ends; Done tells when that goroutine is gone.
func Connect(ctx context.Context, opts Options, log logr.Logger) (*Session, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	cfg := vaultapi.DefaultConfig()
	if cfg.Error != nil {
		return nil, fmt.Errorf("vault client configuration: %w", cfg.Error)
	}
	cfg.Address = opts.Addr
	cfg.Timeout = opts.Timeout
	c, err := vaultapi.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("vault client of %s: %w", opts.Addr, err)
	}
	c.ClearToken() // NewClient takes $VAULT_TOKEN; only the method chosen gives the token
	s := &Session{Client: c, done: make(chan struct{})}
	if opts.Method == MethodToken {
		token, err := staticToken(opts.TokenFile)
		if err != nil {
			return nil, err
		}
		c.SetToken(token)
		close(s.done)
		return s, nil
	}
	login, err := c.Clone() // without the token: logins carry none
	if err != nil {
		return nil, fmt.Errorf("vault client of %s: %w", opts.Addr, err)
	}
	s.keeper = &keeper{
		vault:   &kubernetesLogin{client: c, login: login, role: opts.Role, mount: opts.Mount},
		opts:    opts,
		log:     log.WithValues("vault", opts.Addr),
		readJWT: func() ([]byte, error) { return readTokenFile(opts.ServiceAccountTokenFile, "--vault-sa-token-file") },
	}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// start logs in once and keeps the token alive in a goroutine until ctx ends.
func (s *Session) start(ctx context.Context) error {
	secret, err := s.keeper.login(ctx)
	if err != nil {
		return err
	}
	go func() {
		defer close(s.done)
		s.keeper.run(ctx, secret)
	}()
	return nil
}

// Stats count the logins and renewals so far (all zero with MethodToken).
func (s *Session) Stats() Stats {
	if s.keeper == nil {
		return Stats{}
	}
	return s.keeper.stats.stats()
}

// Done is closed once the token is no longer kept alive: when the context given to Connect
// ended (at once with MethodToken, whose token is never renewed).
func (s *Session) Done() <-chan struct{} { return s.done }

// kubernetesLogin is the real vault of the keeper: logins through vault/api's auth/kubernetes
// helper on a client without a token, renewals by a LifetimeWatcher.
type kubernetesLogin struct {
	client, login *vaultapi.Client
	role, mount   string
}

func (l *kubernetesLogin) Login(ctx context.Context, jwt string) (*vaultapi.Secret, error) {
	auth, err := k8sauth.NewKubernetesAuth(l.role, k8sauth.WithMountPath(l.mount), k8sauth.WithServiceAccountToken(jwt))
	if err != nil {
		return nil, err
	}
	return auth.Login(ctx, l.login)
}

func (l *kubernetesLogin) Use(token string) { l.client.SetToken(token) }

func (l *kubernetesLogin) Watch(secret *vaultapi.Secret) (watcher, error) {
	return l.client.NewLifetimeWatcher(&vaultapi.LifetimeWatcherInput{Secret: secret})
}

// staticToken reads the token of MethodToken from file, or from $VAULT_TOKEN when file is
// empty.
func staticToken(file string) (string, error) {
	if file == "" {
		if token := os.Getenv("VAULT_TOKEN"); token != "" {
			return token, nil
		}
		return "", errors.New("no Vault token: set --vault-token-file or VAULT_TOKEN (or use --vault-auth=kubernetes)")
	}
	b, err := readTokenFile(file, "--vault-token-file")
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// readTokenFile reads a token from file (at most maxTokenFile bytes), trimmed of spaces; an
// empty file is an error. flag names the option that names the file.
func readTokenFile(file, flag string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if len(b) > maxTokenFile {
		return nil, fmt.Errorf("%s %s: more than %d bytes, not a token", flag, file, maxTokenFile)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, fmt.Errorf("%s %s is empty", flag, file)
	}
	return b, nil
}

// Logical is the part of Vault's logical API components call with their client: reads and
// writes by path. *vaultapi.Logical is one; tests give a fake.
type Logical interface {
	ReadWithContext(ctx context.Context, path string) (*vaultapi.Secret, error)
	WriteWithContext(ctx context.Context, path string, data map[string]any) (*vaultapi.Secret, error)
}
