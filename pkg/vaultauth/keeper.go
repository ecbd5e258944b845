package vaultauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	vaultapi "github.com/hashicorp/vault/api"
	"k8s.io/apimachinery/pkg/util/wait"
)

// vault is the part of Vault the keeper drives; kubernetesLogin over a *vaultapi.Client is the
// real one, the table tests script a fake.
type vault interface {
	// Login logs in with the ServiceAccount token jwt and returns the login's secret; it does
	// not change the component's token.
	Login(ctx context.Context, jwt string) (*vaultapi.Secret, error)
	// Use makes token the component's token.
	Use(token string)
	// Watch returns a watcher, not yet started, keeping the token of secret alive.
	Watch(secret *vaultapi.Secret) (watcher, error)
}

// watcher keeps one token alive; *vaultapi.LifetimeWatcher is one. DoneCh gets nil when the
// token can no longer be renewed (its max TTL is near), an error when a renewal failed.
type watcher interface {
	Start()
	Stop()
	DoneCh() <-chan error
	RenewCh() <-chan *vaultapi.RenewOutput
}

// Stats count what the keeper did since the component started.
type Stats struct {
	// Logins is how many logins succeeded, the first one included.
	Logins int64
	// LoginFailures is how many logins failed (and were retried after a backoff).
	LoginFailures int64
	// Renewals is how many times the token was renewed.
	Renewals int64
	// Expired is how many times the token could no longer be renewed (its max TTL was near)
	// and the keeper logged in again.
	Expired int64
	// RenewalFailures is how many times a renewal failed and the keeper logged in again.
	RenewalFailures int64
	// TokenFileChanges is how many times the ServiceAccount token file changed and the keeper
	// logged in again.
	TokenFileChanges int64
}

// counters are Stats, updated by the keeper's goroutine and read by anyone.
type counters struct {
	logins, loginFailures, renewals, expired, renewalFailures, tokenFileChanges atomic.Int64
}

func (c *counters) stats() Stats {
	return Stats{
		Logins:           c.logins.Load(),
		LoginFailures:    c.loginFailures.Load(),
		Renewals:         c.renewals.Load(),
		Expired:          c.expired.Load(),
		RenewalFailures:  c.renewalFailures.Load(),
		TokenFileChanges: c.tokenFileChanges.Load(),
	}
}

// keeper logs in with the Kubernetes auth method and keeps the token alive: renewed while
// Vault renews it, a new login when it can no longer be renewed, a renewal failed, or the
// ServiceAccount token changed.
type keeper struct {
	vault   vault
	opts    Options
	log     logr.Logger
	readJWT func() ([]byte, error)
	stats   counters
	// jwtSum is the sha256 of the ServiceAccount token of the last login (touched by the first
	// login, then by the keeper's goroutine only).
	jwtSum [sha256.Size]byte
}

// login reads the ServiceAccount token and logs in once, bounded by the timeout; on success
// the new token is the component's.
func (k *keeper) login(ctx context.Context) (*vaultapi.Secret, error) {
	jwt, err := k.readJWT()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, k.opts.Timeout)
	defer cancel()
	secret, err := k.vault.Login(ctx, string(jwt))
	if err != nil {
		return nil, fmt.Errorf("vault: log in at auth/%s/login as role %q with the ServiceAccount token of %s: %w", k.opts.Mount, k.opts.Role, k.opts.ServiceAccountTokenFile, err)
	}
	if secret == nil || secret.Auth == nil || secret.Auth.ClientToken == "" {
		return nil, fmt.Errorf("vault: log in at auth/%s/login as role %q: the answer holds no token", k.opts.Mount, k.opts.Role)
	}
	k.vault.Use(secret.Auth.ClientToken)
	k.jwtSum = sha256.Sum256(jwt)
	k.stats.logins.Add(1)
	k.log.Info("logged in to Vault", "role", k.opts.Role, "mount", k.opts.Mount,
		"policies", secret.Auth.Policies, "ttl", seconds(secret.Auth.LeaseDuration), "renewable", secret.Auth.Renewable)
	return secret, nil
}

// run keeps the token of secret alive, logging in again whenever needed, until ctx ends.
func (k *keeper) run(ctx context.Context, secret *vaultapi.Secret) {
	for {
		if err := k.keep(ctx, secret); err != nil {
			k.log.Error(err, "the Vault token cannot be kept alive; logging in again")
		}
		if ctx.Err() != nil {
			return
		}
		if secret = k.relogin(ctx); secret == nil {
			return
		}
	}
}

// keep renews the token of secret until it can no longer be renewed, a renewal fails, the
// ServiceAccount token file changes, or ctx ends.
func (k *keeper) keep(ctx context.Context, secret *vaultapi.Secret) error {
	w, err := k.vault.Watch(secret)
	if err != nil {
		k.stats.renewalFailures.Add(1)
		return fmt.Errorf("vault: watch the token: %w", err)
	}
	go w.Start()
	defer w.Stop()
	check := time.NewTicker(k.opts.CheckInterval)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case out := <-w.RenewCh():
			k.renewed(out)
		case err := <-w.DoneCh():
			k.drainRenewals(w)
			if err != nil {
				k.stats.renewalFailures.Add(1)
				return fmt.Errorf("vault: renew the token: %w", err)
			}
			k.stats.expired.Add(1)
			k.log.Info("the Vault token can no longer be renewed (its max TTL is near); logging in again")
			return nil
		case <-check.C:
			if k.jwtChanged() {
				k.stats.tokenFileChanges.Add(1)
				k.log.Info("the ServiceAccount token changed; logging in again", "file", k.opts.ServiceAccountTokenFile)
				return nil
			}
		}
	}
}

func (k *keeper) renewed(out *vaultapi.RenewOutput) {
	k.stats.renewals.Add(1)
	if out != nil && out.Secret != nil && out.Secret.Auth != nil {
		k.log.V(1).Info("renewed the Vault token", "ttl", seconds(out.Secret.Auth.LeaseDuration))
	}
}

// drainRenewals counts the renewals the watcher reported just before it was done.
func (k *keeper) drainRenewals(w watcher) {
	for {
		select {
		case out := <-w.RenewCh():
			k.renewed(out)
		default:
			return
		}
	}
}

// jwtChanged tells whether the ServiceAccount token file now holds another token. A file that
// cannot be read is logged and counts as unchanged: the current Vault token still works.
func (k *keeper) jwtChanged() bool {
	jwt, err := k.readJWT()
	if err != nil {
		k.log.Error(err, "check the ServiceAccount token file")
		return false
	}
	return sha256.Sum256(jwt) != k.jwtSum
}

// relogin logs in until it succeeds, waiting between attempts from MinBackoff, doubling, up
// to MaxBackoff; it returns nil when ctx ends first.
func (k *keeper) relogin(ctx context.Context) *vaultapi.Secret {
	backoff := wait.Backoff{Duration: k.opts.MinBackoff, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: k.opts.MaxBackoff}
	for {
		secret, err := k.login(ctx)
		if err == nil {
			return secret
		}
		k.stats.loginFailures.Add(1)
		delay := backoff.Step()
		k.log.Error(err, "vault login failed", "retryIn", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }
